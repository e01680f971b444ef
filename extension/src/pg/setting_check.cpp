#include "extension/src/pg/setting_check.hpp"

#include <exception>

#include "extension/src/pg/postgres.hpp"

namespace kvg::pg {

bool check_string_setting(char** newval, SettingProblem problem) {
  static char why[512];
  why[0] = '\0';
  try {
    if (auto found = problem(*newval ? *newval : "")) strlcpy(why, found->c_str(), sizeof(why));
  } catch (const std::exception& e) {
    strlcpy(why, *e.what() ? e.what() : "invalid value", sizeof(why));
  } catch (...) {
    strlcpy(why, "unexpected error", sizeof(why));
  }
  if (why[0] == '\0') return true;
  GUC_check_errdetail("%s", why);
  return false;
}

}  // namespace kvg::pg
