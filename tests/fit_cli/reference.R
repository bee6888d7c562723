# Reference values for `memdecay-calibrate fit` on data/events/demo-events.csv,
# computed with R survival (survreg, survfit, quantile.survfit, survdiff).
# Writes tests/fit_cli/data/demo-reference.txt: one PATH=VALUE per line in
# memdecay.json's layout (memdecay-config(5)), checked by json_check.
# Run from the source root:  Rscript tests/fit_cli/reference.R
suppressPackageStartupMessages(library(survival))
level <- 0.95
z <- qnorm(1 - (1 - level) / 2)
events <- read.csv("data/events/demo-events.csv")
known <- c("system", "plan", "user", "tool_in", "tool_out", "retrieval", "scratchpad")
regions <- c(intersect(known, unique(events$region)), sort(setdiff(unique(events$region), known)))
out <- character(0)
put <- function(path, value) {
  text <- if (is.na(value) || !is.finite(value)) "null" else sprintf("%.17g", value)
  out <<- c(out, paste0(path, "=", text))
}

# Profile-likelihood interval of lambda: 2 (l(lambda_hat) - l(lambda)) = chi2_1(level),
# l(lambda) = d log(lambda) - lambda T.
profile_ci <- function(d, T) {
  lhat <- d / T
  ll <- function(l) d * log(l) - l * T
  cut <- qchisq(level, 1) / 2
  f <- function(l) ll(lhat) - ll(l) - cut
  c(uniroot(f, c(lhat * 1e-6, lhat), tol = 1e-14)$root,
    uniroot(f, c(lhat, lhat * 1e3), tol = 1e-14)$root)
}

for (r in regions) {
  d <- events[events$region == r, ]
  p <- paste0("regions.", r)
  put(paste0(p, ".fit.n"), nrow(d))
  put(paste0(p, ".fit.events"), sum(d$event))
  put(paste0(p, ".fit.exposure"), sum(d$time))

  e <- survreg(Surv(time, event) ~ 1, data = d, dist = "exponential")
  mu <- coef(e)[[1]]
  se <- sqrt(vcov(e)[1, 1])
  lambda <- exp(-mu)
  lambda_ci <- exp(-(mu + c(1, -1) * z * se))
  put(paste0(p, ".lambda"), lambda)
  put(paste0(p, ".half_life"), log(2) / lambda)
  put(paste0(p, ".half_life_ci[0]"), log(2) / lambda_ci[2])
  put(paste0(p, ".half_life_ci[1]"), log(2) / lambda_ci[1])
  q <- paste0(p, ".fit.exponential")
  put(paste0(q, ".lambda"), lambda)
  put(paste0(q, ".lambda_ci[0]"), lambda_ci[1])
  put(paste0(q, ".lambda_ci[1]"), lambda_ci[2])
  prof <- profile_ci(sum(d$event), sum(d$time))
  put(paste0(q, ".lambda_ci_profile[0]"), prof[1])
  put(paste0(q, ".lambda_ci_profile[1]"), prof[2])
  put(paste0(q, ".loglik"), e$loglik[2])
  put(paste0(q, ".aic"), -2 * e$loglik[2] + 2)

  w <- survreg(Surv(time, event) ~ 1, data = d, dist = "weibull")
  wmu <- coef(w)[[1]]
  log_sigma <- log(w$scale)
  v <- vcov(w)
  q <- paste0(p, ".fit.weibull")
  put(paste0(q, ".shape"), 1 / w$scale)
  put(paste0(q, ".scale"), exp(wmu))
  put(paste0(q, ".shape_ci[0]"), exp(-(log_sigma + z * sqrt(v[2, 2]))))
  put(paste0(q, ".shape_ci[1]"), exp(-(log_sigma - z * sqrt(v[2, 2]))))
  put(paste0(q, ".scale_ci[0]"), exp(wmu - z * sqrt(v[1, 1])))
  put(paste0(q, ".scale_ci[1]"), exp(wmu + z * sqrt(v[1, 1])))
  put(paste0(q, ".loglik"), w$loglik[2])
  put(paste0(q, ".aic"), -2 * w$loglik[2] + 4)
  lrt <- 2 * (w$loglik[2] - e$loglik[2])
  put(paste0(q, ".lrt_statistic"), lrt)
  put(paste0(q, ".lrt_p"), pchisq(lrt, 1, lower.tail = FALSE))

  km <- survfit(Surv(time, event) ~ 1, data = d, conf.type = "log", conf.int = level)
  med <- quantile(km, 0.5)
  q <- paste0(p, ".fit.km")
  put(paste0(q, ".median"), med$quantile[[1]])
  put(paste0(q, ".median_ci[0]"), med$lower[[1]])
  put(paste0(q, ".median_ci[1]"), med$upper[[1]])
}

logrank <- function(data) {
  s <- survdiff(Surv(time, event) ~ region, data = data)
  df <- sum(diag(s$var) > 0) - 1
  c(s$chisq, df, pchisq(s$chisq, df, lower.tail = FALSE))
}
all <- logrank(events)
put("tests.logrank.overall.statistic", all[1])
put("tests.logrank.overall.df", all[2])
put("tests.logrank.overall.p", all[3])
k <- 0
for (i in seq_along(regions)) for (j in seq_along(regions)) if (i < j) {
  pair <- logrank(events[events$region %in% regions[c(i, j)], ])
  p <- sprintf("tests.logrank.pairwise[%d]", k)
  put(paste0(p, ".statistic"), pair[1])
  put(paste0(p, ".df"), pair[2])
  put(paste0(p, ".p"), pair[3])
  k <- k + 1
}
writeLines(c(sprintf("# R %s, survival %s: Rscript tests/fit_cli/reference.R",
                     paste(R.version$major, R.version$minor, sep = "."),
                     packageVersion("survival")), out),
           "tests/fit_cli/data/demo-reference.txt")
