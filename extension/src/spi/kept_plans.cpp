#include "extension/src/spi/kept_plans.hpp"

#include <string>
#include <unordered_map>

#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/pg/postgres.hpp"

namespace kvg::pg {

namespace {

// The process's kept plans. A plan lives in the plan cache's memory until
// the process ends: kvg never frees one (its statements are few and fixed).
std::unordered_map<std::string, SPIPlanPtr>& kept() {
  static std::unordered_map<std::string, SPIPlanPtr> plans;
  return plans;
}

std::string key_of(const char* sql, int n_params, const unsigned int* types) {
  std::string key(sql);
  key.push_back('\0');  // no statement text holds a NUL: the types cannot run into it
  key.append(reinterpret_cast<const char*>(types), sizeof(unsigned int) * size_t(n_params));
  return key;
}

}  // namespace

_SPI_plan* plan_of(const char* sql, int n_params, const unsigned int* types) {
  static_assert(sizeof(Oid) == sizeof(unsigned int));
  auto& plans = kept();
  const std::string key = key_of(sql, n_params, types);
  if (const auto found = plans.find(key); found != plans.end() && found->second) return found->second;
  // The entry is made first, in C++ (an allocation may throw), and filled
  // once PostgreSQL has prepared and kept the plan; a failed prepare takes it
  // out again, so no entry is ever without its plan when this returns.
  const bool keep = plans.size() < kMaxKeptPlans;
  const auto entry = keep ? plans.try_emplace(key, nullptr).first : plans.end();
  try {
    const SPIPlanPtr plan = call([&] {
      const SPIPlanPtr prepared = SPI_prepare(sql, n_params, const_cast<Oid*>(types));
      if (!prepared) elog(ERROR, "kvg: cannot prepare a statement (%s): %s", SPI_result_code_string(SPI_result), sql);
      if (keep && SPI_keepplan(prepared) != 0) elog(ERROR, "kvg: cannot keep the plan of: %s", sql);
      return prepared;
    });
    if (keep) entry->second = plan;
    return plan;
  } catch (...) {
    if (keep) plans.erase(entry);
    throw;
  }
}

size_t kept_plan_count() { return kept().size(); }

}  // namespace kvg::pg
