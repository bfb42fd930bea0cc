#pragma once
// Everything a LibTorch training loop needs from fathom.
#include <fathom/fathom_core.h>
#include <fathom/sequential.h>
#include <fathom/session.h>
