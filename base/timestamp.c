#include "base/timestamp.h"

#include <time.h>

void md_timestamp_now(char out[32]) {
  time_t now = time(NULL);
  struct tm utc;
  gmtime_r(&now, &utc);
  strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &utc);
}
