/* The time a file was made, as the run directory, the sidecar, the config and
 * the eval results record it ("created"). */
#ifndef MD_BASE_TIMESTAMP_H
#define MD_BASE_TIMESTAMP_H

/* The current time as ISO 8601 UTC to the second ("2025-06-11T09:30:00Z"). */
void md_timestamp_now(char out[32]);

#endif
