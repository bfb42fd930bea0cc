#include "distributed/summary_exchange.h"

#include <algorithm>
#include <exception>
#include <thread>

namespace fathom::detail {

SummaryExchange::SummaryExchange(c10::intrusive_ptr<c10d::Store> store, RankInfo rank,
                                 std::chrono::milliseconds timeout, std::string prefix)
    : store_(std::move(store)), rank_(rank), timeout_(timeout), prefix_(std::move(prefix)) {}

std::string SummaryExchange::key(std::int64_t epoch, int rank) const {
  return prefix_ + "e" + std::to_string(epoch) + "/r" + std::to_string(rank);
}

std::string SummaryExchange::counter(std::int64_t epoch) const {
  return prefix_ + "e" + std::to_string(epoch) + "/posted";
}

std::string SummaryExchange::post(std::int64_t epoch,
                                  const std::vector<std::uint8_t>& bytes) noexcept {
  try {
    store_->set(key(epoch, rank_.rank), bytes);
    store_->add(counter(epoch), 1);  // after the set: a counted summary is always readable
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

Gathered SummaryExchange::gather(std::int64_t epoch) noexcept {
  using Clock = std::chrono::steady_clock;
  Gathered g;
  const auto start = Clock::now();
  const auto deadline = start + timeout_;
  const int expected = rank_.world_size - 1;
  try {
    // Poll, from 1 ms up to 50 ms apart: cheap for the store, prompt for the usual case where
    // every rank reaches the epoch end within a step of the others.
    auto pause = std::chrono::milliseconds(1);
    std::int64_t posted = store_->add(counter(epoch), 0);
    while (posted < expected && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
      posted = store_->add(counter(epoch), 0);
    }
    for (int r = 1; r < rank_.world_size; ++r) {
      const std::string k = key(epoch, r);
      // All posted: every key is there. Otherwise look before reading: get() would block.
      if (posted < expected && !store_->check({k})) continue;
      g.payloads.emplace_back(r, store_->get(k));
      store_->deleteKey(k);
    }
    store_->deleteKey(counter(epoch));
  } catch (const std::exception& e) {
    g.error = e.what();
  }
  g.waited_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return g;
}

}  // namespace fathom::detail
