#include "io/formats/km_csv.h"

#include "base/numfmt.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void write_curve(FILE *fp, const char *region, const md_km_curve *curve) {
  const double *columns[] = {curve->time,    curve->n_risk, curve->n_event, curve->n_censor,
                             curve->surv,    curve->std_err, curve->lower,  curve->upper};
  enum { n_columns = sizeof columns / sizeof columns[0] };
  char number[MD_NUMBER_TEXT_MAX];
  for (size_t row = 0; row < curve->n_times; row++) {
    fputs(region, fp);
    for (size_t c = 0; c < n_columns; c++) {
      fputc(',', fp);
      fputs(md_format_shortest(number, columns[c][row]), fp);
    }
    fputc('\n', fp);
  }
}

md_status md_km_csv_write(FILE *fp, const char *path, const char *const *regions,
                          const md_km_curve *const *curves, size_t n_curves, md_error *err) {
  fputs(MD_KM_CSV_HEADER "\n", fp);
  for (size_t i = 0; i < n_curves; i++) {
    if (curves[i]) write_curve(fp, regions[i], curves[i]);
  }
  if (ferror(fp)) return md_fail(err, MD_E_IO, "%s: write failed: %s", path, strerror(errno));
  return MD_OK;
}
