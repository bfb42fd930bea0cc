UPDATE StringIds SET value = hex(randomblob(1500000)) WHERE id = 1000;
