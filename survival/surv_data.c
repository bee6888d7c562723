/* Survival data: validation and compression into a sorted table of distinct
 * (entry, time, event) rows with summed weights. */
#include "survival/surv_data.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A distinct row while it is being built. The two keys order rows exactly as
 * the table wants them when compared as unsigned integers: time first (a
 * positive double's bits are monotone in its value), then event with events
 * first (bit 63 of order_key holds 1 - event), then entry (>= 0, so its bits
 * are monotone too and bit 63 is free). */
typedef struct surv_record {
  uint64_t time_key;
  uint64_t order_key;
  double weight;
} surv_record;

#define EVENTLESS_BIT (UINT64_C(1) << 63)

static uint64_t double_bits(double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  return bits;
}

static double bits_double(uint64_t bits) {
  double x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

static md_status reject_row(md_surv_table *table, md_error *err, size_t row, const char *what,
                            double value) {
  table->invalid_row = row;
  return md_fail(err, MD_E_INVALID, "survival data row %zu (0-based): %s (got %.17g)", row, what,
                 value);
}

/* Checks one row and fills its record. */
static md_status read_row(const md_surv_data *data, size_t i, surv_record *record,
                          md_surv_table *table, md_error *err) {
  double time = data->time[i];
  double entry = data->entry ? data->entry[i] : 0.0;
  double weight = data->weight ? data->weight[i] : 1.0;
  uint8_t event = data->event[i];
  if (!isfinite(time)) return reject_row(table, err, i, "time is not a finite number", time);
  if (!isfinite(entry) || !(entry >= 0.0))
    return reject_row(table, err, i, "entry must be a finite number >= 0", entry);
  if (!(time > entry))
    return reject_row(table, err, i, "time must be greater than entry", time);
  if (event > 1) return reject_row(table, err, i, "event must be 0 or 1", (double)event);
  if (!isfinite(weight) || !(weight > 0.0))
    return reject_row(table, err, i, "weight must be a finite number > 0", weight);
  if (entry == 0.0) entry = 0.0; /* -0 and 0 are the same entry */
  record->time_key = double_bits(time);
  record->order_key = double_bits(entry) | (event ? 0 : EVENTLESS_BIT);
  record->weight = weight;
  return MD_OK;
}

/* ---- path 1: hash aggregation (few distinct rows) ------------------------ */

typedef struct record_hash {
  surv_record *slots; /* weight == 0 marks an empty slot (weights are > 0) */
  size_t capacity;    /* a power of two */
  size_t count;
} record_hash;

/* SplitMix64's finaliser (Steele, Lea, Flood 2014): a cheap, well-mixing hash. */
static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= UINT64_C(0xbf58476d1ce4e5b9);
  x ^= x >> 27;
  x *= UINT64_C(0x94d049bb133111eb);
  return x ^ (x >> 31);
}

static size_t hash_slot(const record_hash *hash, const surv_record *record) {
  uint64_t h = mix64(record->time_key ^ mix64(record->order_key));
  size_t mask = hash->capacity - 1;
  size_t slot = (size_t)h & mask;
  while (hash->slots[slot].weight != 0.0 &&
         (hash->slots[slot].time_key != record->time_key ||
          hash->slots[slot].order_key != record->order_key))
    slot = (slot + 1) & mask;
  return slot;
}

static bool hash_grow(record_hash *hash) {
  record_hash bigger = {calloc(hash->capacity * 2, sizeof(surv_record)), hash->capacity * 2,
                        hash->count};
  if (!bigger.slots) return false;
  for (size_t i = 0; i < hash->capacity; i++)
    if (hash->slots[i].weight != 0.0) bigger.slots[hash_slot(&bigger, &hash->slots[i])] = hash->slots[i];
  free(hash->slots);
  *hash = bigger;
  return true;
}

typedef enum aggregate_outcome { AGGREGATED, TOO_MANY_DISTINCT } aggregate_outcome;

/* Rows after which a table with more than half of them distinct gives up
 * the hash (only for tables of at least 4 times as many rows). */
enum { HASH_PROBE_ROWS = 65536 };

/* Aggregates all rows into the hash unless more than max_distinct distinct
 * rows occur, or more than half of the first HASH_PROBE_ROWS are distinct.
 * Validation of every row happens here or in the sort path. */
static md_status hash_aggregate(const md_surv_data *data, size_t max_distinct, record_hash *hash,
                                aggregate_outcome *outcome, md_surv_table *table,
                                md_error *err) {
  hash->capacity = 1024;
  hash->count = 0;
  hash->slots = calloc(hash->capacity, sizeof(surv_record));
  if (!hash->slots) return md_fail(err, MD_E_NOMEM, "survival data: out of memory");
  *outcome = AGGREGATED;
  for (size_t i = 0; i < data->n; i++) {
    /* Most of a long prefix distinct: the data is not of the kind the hash
     * is for (real-valued times), so sort now rather than hash n / 8 rows
     * first. The sort path validates every row and gives the same table. */
    if (i == HASH_PROBE_ROWS && data->n >= 4 * (size_t)HASH_PROBE_ROWS &&
        hash->count > HASH_PROBE_ROWS / 2) {
      *outcome = TOO_MANY_DISTINCT;
      return MD_OK;
    }
    surv_record record;
    md_status status = read_row(data, i, &record, table, err);
    if (status != MD_OK) return status;
    size_t slot = hash_slot(hash, &record);
    if (hash->slots[slot].weight != 0.0) {
      hash->slots[slot].weight += record.weight;
      continue;
    }
    if (hash->count + 1 > max_distinct) {
      *outcome = TOO_MANY_DISTINCT;
      return MD_OK;
    }
    hash->slots[slot] = record;
    hash->count++;
    if (2 * hash->count > hash->capacity && !hash_grow(hash))
      return md_fail(err, MD_E_NOMEM, "survival data: out of memory");
  }
  return MD_OK;
}

/* ---- sorting ----------------------------------------------------------- */

enum { RADIX_PASSES = 16, RADIX_BUCKETS = 256 };

static unsigned record_byte(const surv_record *record, unsigned pass) {
  uint64_t key = pass < 8 ? record->order_key : record->time_key;
  return (unsigned)(key >> (8 * (pass % 8))) & 0xffu;
}

/* Stable LSD radix sort on (time_key, order_key): 16 byte passes, skipping
 * those in which every record has the same byte (most of them for integer
 * times and zero entries). Returns the buffer that holds the result, which
 * is `records` or `scratch`. */
static surv_record *radix_sort(surv_record *records, surv_record *scratch, size_t n,
                               size_t (*counts)[RADIX_BUCKETS]) {
  memset(counts, 0, RADIX_PASSES * sizeof *counts);
  for (size_t i = 0; i < n; i++)
    for (unsigned pass = 0; pass < RADIX_PASSES; pass++)
      counts[pass][record_byte(&records[i], pass)]++;
  for (unsigned pass = 0; pass < RADIX_PASSES; pass++) {
    size_t *count = counts[pass];
    if (count[record_byte(&records[0], pass)] == n) continue;
    size_t offset = 0;
    for (unsigned b = 0; b < RADIX_BUCKETS; b++) {
      size_t c = count[b];
      count[b] = offset;
      offset += c;
    }
    for (size_t i = 0; i < n; i++) scratch[count[record_byte(&records[i], pass)]++] = records[i];
    surv_record *sorted = scratch;
    scratch = records;
    records = sorted;
  }
  return records;
}

/* Sorts *records (n of them) in place of the pointer: on success *records is
 * the sorted buffer and the other buffer has been freed. */
static md_status sort_records(surv_record **records, size_t n, md_error *err) {
  if (n < 2) return MD_OK;
  surv_record *scratch = malloc(n * sizeof *scratch);
  size_t(*counts)[RADIX_BUCKETS] = malloc(RADIX_PASSES * sizeof *counts);
  if (!scratch || !counts) {
    free(scratch);
    free(counts);
    return md_fail(err, MD_E_NOMEM, "survival data: out of memory");
  }
  surv_record *sorted = radix_sort(*records, scratch, n, counts);
  free(sorted == scratch ? *records : scratch);
  free(counts);
  *records = sorted;
  return MD_OK;
}

/* ---- path 2: sort everything, then merge --------------------------------- */

static md_status sort_aggregate(const md_surv_data *data, surv_record **records, size_t *n_distinct,
                                md_surv_table *table, md_error *err) {
  *records = malloc(data->n * sizeof **records);
  if (!*records) return md_fail(err, MD_E_NOMEM, "survival data: out of memory");
  for (size_t i = 0; i < data->n; i++) {
    md_status status = read_row(data, i, &(*records)[i], table, err);
    if (status != MD_OK) return status;
  }
  md_status status = sort_records(records, data->n, err);
  if (status != MD_OK) return status;
  /* Stable sort: equal keys are adjacent and in input order. */
  surv_record *r = *records;
  size_t out = 0;
  for (size_t i = 0; i < data->n; i++) {
    if (out > 0 && r[out - 1].time_key == r[i].time_key && r[out - 1].order_key == r[i].order_key)
      r[out - 1].weight += r[i].weight;
    else
      r[out++] = r[i];
  }
  *n_distinct = out;
  return MD_OK;
}

/* ---- the table --------------------------------------------------------- */

static md_status fill_table(const surv_record *records, size_t n, md_surv_table *table,
                            md_error *err) {
  table->time = malloc(n * sizeof *table->time);
  table->event = malloc(n * sizeof *table->event);
  table->entry = malloc(n * sizeof *table->entry);
  table->weight = malloc(n * sizeof *table->weight);
  if (!table->time || !table->event || !table->entry || !table->weight)
    return md_fail(err, MD_E_NOMEM, "survival data: out of memory");
  table->n = n;
  for (size_t i = 0; i < n; i++) {
    table->time[i] = bits_double(records[i].time_key);
    table->event[i] = (records[i].order_key & EVENTLESS_BIT) ? 0 : 1;
    table->entry[i] = bits_double(records[i].order_key & ~EVENTLESS_BIT);
    table->weight[i] = records[i].weight;
    if (table->entry[i] > 0.0) table->has_entry = 1;
  }
  return MD_OK;
}

/* Gathers the occupied hash slots into a compact array. */
static surv_record *hash_records(const record_hash *hash) {
  surv_record *records = malloc((hash->count ? hash->count : 1) * sizeof *records);
  if (!records) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < hash->capacity; i++)
    if (hash->slots[i].weight != 0.0) records[k++] = hash->slots[i];
  return records;
}

static md_status build(const md_surv_data *data, md_surv_table *table, md_error *err) {
  /* The hash stays worthwhile while distinct rows are a small share of all. */
  size_t max_distinct = data->n / 8 > 65536 ? data->n / 8 : 65536;
  record_hash hash = {0};
  aggregate_outcome outcome = AGGREGATED;
  surv_record *records = NULL;
  size_t n_distinct = 0;
  md_status status = hash_aggregate(data, max_distinct, &hash, &outcome, table, err);
  if (status == MD_OK && outcome == AGGREGATED) {
    n_distinct = hash.count;
    records = hash_records(&hash);
    free(hash.slots);
    hash.slots = NULL;
    if (!records) status = md_fail(err, MD_E_NOMEM, "survival data: out of memory");
    if (status == MD_OK) status = sort_records(&records, n_distinct, err);
  } else if (status == MD_OK) {
    free(hash.slots);
    hash.slots = NULL;
    status = sort_aggregate(data, &records, &n_distinct, table, err);
  }
  free(hash.slots);
  if (status == MD_OK) status = fill_table(records, n_distinct, table, err);
  free(records);
  return status;
}

md_status md_surv_table_build(const md_surv_data *data, md_surv_table *table, md_error *err) {
  if (!table) return md_fail(err, MD_E_INVALID, "survival data: no table to fill");
  memset(table, 0, sizeof *table);
  table->invalid_row = SIZE_MAX;
  if (!data || !data->time || !data->event)
    return md_fail(err, MD_E_INVALID, "survival data: time and event columns are required");
  if (data->n == 0) return md_fail(err, MD_E_INVALID, "survival data: no rows");
  table->n_input = data->n;
  md_status status = build(data, table, err);
  if (status != MD_OK) {
    size_t invalid_row = table->invalid_row;
    md_surv_table_free(table);
    table->invalid_row = invalid_row;
  }
  return status;
}

void md_surv_table_free(md_surv_table *table) {
  if (!table) return;
  free(table->time);
  free(table->event);
  free(table->entry);
  free(table->weight);
  memset(table, 0, sizeof *table);
  table->invalid_row = SIZE_MAX;
}

void md_surv_table_totals(const md_surv_table *table, md_surv_totals *totals) {
  memset(totals, 0, sizeof *totals);
  totals->rows = (double)table->n_input;
  double last_event_time = NAN;
  for (size_t i = 0; i < table->n; i++) {
    double w = table->weight[i];
    totals->weight += w;
    totals->exposure += w * (table->time[i] - table->entry[i]);
    if (!table->event[i]) continue;
    totals->events += w;
    if (!(table->time[i] == last_event_time)) totals->distinct_event_times++;
    last_event_time = table->time[i];
  }
}
