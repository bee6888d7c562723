/* md_events_append: an events set built in memory (extract --plot) holds
 * the same per-region columns as one read from a file, and refuses what the
 * reader refuses. */
#include <string.h>

#include "io/formats/events.h"
#include "tests/test_util.h"

int main(void) {
  md_events events;
  memset(&events, 0, sizeof events);
  md_error err = {0};
  CHECK(md_events_append(&events, "user", 3, 1, 0, 1, &err) == MD_OK);
  CHECK(md_events_append(&events, "system", 7, 0, 0, 1, &err) == MD_OK);
  CHECK(md_events_append(&events, "user", 5, 0, 2, 1, &err) == MD_OK);
  CHECK(md_events_append(&events, "user", 9, 1, 0, 2.5, &err) == MD_OK);
  CHECK(events.n_regions == 2 && events.n_rows == 4);
  const md_events_region *user = md_events_find(&events, "user");
  CHECK(user && user->n == 3 && user->time[2] == 9 && user->event[1] == 0);
  /* Optional columns appear once a row departs from the defaults. */
  CHECK(user && user->entry && user->entry[0] == 0 && user->entry[1] == 2);
  CHECK(user && user->weight && user->weight[0] == 1 && user->weight[2] == 2.5);
  const md_events_region *system = md_events_find(&events, "system");
  CHECK(system && system->n == 1 && !system->entry && !system->weight);
  /* Refused: bad name, time not after entry, event not 0/1, weight <= 0. */
  CHECK(md_events_append(&events, "User", 1, 1, 0, 1, &err) == MD_E_INVALID);
  CHECK(strstr(err.message, "\"User\" is not a valid region name") != NULL);
  CHECK(md_events_append(&events, "user", 2, 1, 2, 1, &err) == MD_E_INVALID);
  CHECK(md_events_append(&events, "user", 2, 2, 0, 1, &err) == MD_E_INVALID);
  CHECK(md_events_append(&events, "user", 2, 1, 0, 0, &err) == MD_E_INVALID);
  CHECK(md_events_append(&events, "user", 1.0 / 0.0, 1, 0, 1, &err) == MD_E_INVALID);
  CHECK(events.n_rows == 4);
  md_events_free(&events);
  return md_test_finish("events_append");
}
