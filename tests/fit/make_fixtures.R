# Regenerates tests/fit/fixtures/: survival datasets (events CSV files) and
# R survival's answers for them, which tests/fit/test_fit_reference.c
# compares against. Run from the source root:
#
#   Rscript tests/fit/make_fixtures.R
#
# Needs R >= 4.2 with survival >= 3.5 (nothing else). Deterministic: the
# same R and survival versions write the same files.
# fixtures/VERSIONS records the R and survival versions of the last run.
#
# Answers: <dataset>.tsv, one number per line,
#   dataset <TAB> region <TAB> quantity <TAB> index <TAB> value
# with values printed by sprintf("%.17g") and R's NA/NaN as NA. Where the
# reference functions cannot handle delayed entry, the answers come from the
# left-truncated likelihood maximised directly here (nlminb at tight
# tolerance, profile ends by uniroot), from coxph's score test (no tied event
# times) and from survdiff with one stratum per event time's risk set; those
# routes are first checked against survreg/survdiff on data without entry.

suppressPackageStartupMessages(library(survival))
stopifnot(packageVersion("survival") >= "3.5")
RNGversion("4.2.0")
set.seed(20240611)

out_dir <- file.path("tests", "fit", "fixtures")
if (!dir.exists(out_dir)) stop("run from the source root (", out_dir, " not found)")

# ---- writing ---------------------------------------------------------------

answers <- list()
put <- function(region, quantity, value, index = seq_along(value) - 1L) {
  value <- as.numeric(value)
  text <- ifelse(is.na(value), "NA", sprintf("%.17g", value))
  answers[[length(answers) + 1]] <<- data.frame(region = region, quantity = quantity,
                                                index = index, value = text)
}

write_dataset <- function(name, d, level) {
  csv <- data.frame(region = d$region, entry = sprintf("%.17g", d$entry),
                    time = sprintf("%.17g", d$time), event = d$event,
                    weight = sprintf("%.17g", d$weight))
  write.csv(csv, file.path(out_dir, paste0(name, ".csv")), row.names = FALSE, quote = FALSE)
  a <- do.call(rbind, c(list(data.frame(region = "*", quantity = "level", index = 0L,
                                        value = sprintf("%.17g", level))), answers))
  lines <- paste(name, a$region, a$quantity, a$index, a$value, sep = "\t")
  writeLines(lines, file.path(out_dir, paste0(name, ".tsv")))
  answers <<- list()
}

# ---- data ------------------------------------------------------------------

# Right-censored lifetimes in whole decode steps (heavy ties): T ~ Weibull,
# C ~ uniform; time = ceiling(min(T, C)).
integer_lifetimes <- function(region, n, shape, scale, cens_lo, cens_hi, weight = NULL) {
  t <- rweibull(n, shape, scale)
  c <- runif(n, cens_lo, cens_hi)
  time <- ceiling(pmin(t, c))
  event <- as.integer(t <= c)
  if (is.null(weight)) weight <- rep(1, n)
  data.frame(region = region, entry = 0, time = time, event = event, weight = weight)
}

# Left-truncated lifetimes: entry ~ 0 or uniform, T drawn until T > entry,
# censoring a uniform time after entry; continuous times rounded to 1e-3.
truncated_lifetimes <- function(region, n, shape, scale, entry_share, entry_max) {
  entry <- ifelse(runif(n) < entry_share, round(runif(n, 0, entry_max), 3), 0)
  t <- numeric(n)
  for (i in seq_len(n)) repeat {
    t[i] <- round(rweibull(1, shape, scale), 3)
    if (t[i] > entry[i]) break
  }
  c <- round(entry + runif(n, 5, 250), 3)
  data.frame(region = region, entry = entry, time = pmin(t, c),
             event = as.integer(t <= c), weight = 1)
}

groups_of <- function(d) factor(d$region, levels = unique(d$region))

# ---- exponential and Weibull ------------------------------------------------

level_z <- function(level) qnorm(1 - (1 - level) / 2)

# The left-truncated log-likelihood, written with R's own Weibull functions:
# sum w [event log f(t) + (1 - event) log S(t) - log S(entry)].
weibull_loglik <- function(par, d) {
  shape <- exp(-par[2]); scale <- exp(par[1])
  ll <- ifelse(d$event == 1, dweibull(d$time, shape, scale, log = TRUE),
               pweibull(d$time, shape, scale, lower.tail = FALSE, log.p = TRUE)) -
        pweibull(d$entry, shape, scale, lower.tail = FALSE, log.p = TRUE)
  sum(d$weight * ll)
}

# Its gradient in (mu, log sigma), from H(t) = (t/b)^k with b = e^mu,
# k = e^-log sigma: dH/dmu = -k H, dH/dlog sigma = -k log(t/b) H, and
# d log h / dmu = -k, d log h / dlog sigma = -1 - k log(t/b).
weibull_gradient <- function(par, d) {
  k <- exp(-par[2]); b <- exp(par[1])
  H <- (d$time / b)^k; H0 <- (d$entry / b)^k
  lt <- log(d$time / b); le <- ifelse(d$entry > 0, log(d$entry / b), 0)
  g_mu <- d$event * (-k) + k * H - k * H0
  g_s <- d$event * (-1 - k * lt) + k * lt * H - k * le * H0
  c(sum(d$weight * g_mu), sum(d$weight * g_s))
}

exponential_loglik <- function(log_lambda, d) {
  lambda <- exp(log_lambda)
  ll <- ifelse(d$event == 1, dexp(d$time, lambda, log = TRUE),
               pexp(d$time, lambda, lower.tail = FALSE, log.p = TRUE)) -
        pexp(d$entry, lambda, lower.tail = FALSE, log.p = TRUE)
  sum(d$weight * ll)
}
exponential_gradient <- function(log_lambda, d) {
  sum(d$weight * (d$event - exp(log_lambda) * (d$time - d$entry)))
}

# Direct maximisation: nlminb on the negative log-likelihood with the
# gradient above, then Newton steps with the information from optimHess
# (central differences of the gradient) until the gradient vanishes to
# rounding; nlminb alone stops a little short at tight tolerances.
direct_fit <- function(start, loglik, gradient, d) {
  stopifnot(isTRUE(all.equal(gradient(start, d), numeric_gradient(start, loglik, d),
                             tolerance = 1e-6)))
  negll <- function(p) -loglik(p, d)
  neggr <- function(p) -gradient(p, d)
  information <- function(p) optimHess(p, negll, neggr, control = list(ndeps = rep(1e-5, length(p))))
  par <- nlminb(start, negll, neggr, control = list(eval.max = 2000, iter.max = 2000))$par
  for (i in 1:6) par <- par + drop(solve(information(par), gradient(par, d)))
  stopifnot(max(abs(gradient(par, d))) < 1e-9 * sum(d$weight))
  list(par = unname(par), loglik = loglik(par, d), vcov = solve(information(par)))
}

numeric_gradient <- function(par, loglik, d, h = 1e-6) {
  sapply(seq_along(par), function(i) {
    e <- replace(numeric(length(par)), i, h)
    (loglik(par + e, d) - loglik(par - e, d)) / (2 * h)
  })
}

# Profile-likelihood interval of lambda: {2 (ll_max - ll) <= chi2_1(level)}.
profile_interval <- function(d, lambda_hat, ll_max, level) {
  q <- qchisq(level, 1)
  f <- function(x) 2 * (ll_max - exponential_loglik(x, d)) - q
  upper <- uniroot(f, c(log(lambda_hat), log(lambda_hat) + 50), tol = 1e-14)$root
  lower <- uniroot(f, c(log(lambda_hat) - 50, log(lambda_hat)), tol = 1e-14)$root
  exp(c(lower, upper))
}

put_exponential <- function(region, d, level, survreg_fit = NULL, direct = NULL) {
  events <- sum(d$weight * d$event)
  exposure <- sum(d$weight * (d$time - d$entry))
  put(region, "exp_events", events)
  put(region, "exp_exposure", exposure)
  if (events == 0) {
    # ll(lambda) = -lambda T has its supremum 0 at lambda = 0.
    q <- qchisq(level, 1)
    upper <- uniroot(function(x) 2 * exp(x) * exposure - q,
                     c(log(q / (2 * exposure)) - 50, log(q / (2 * exposure)) + 50),
                     tol = 1e-14)$root
    put(region, "exp_estimable", 0)
    put(region, "exp_lambda", 0)
    put(region, "exp_ci_profile", c(0, exp(upper)))
    return(invisible(NULL))
  }
  if (!is.null(survreg_fit)) {
    log_lambda <- -unname(coef(survreg_fit))
    se <- sqrt(survreg_fit$var[1, 1])
    loglik <- survreg_fit$loglik[2]
    aic <- AIC(survreg_fit)
  } else {
    log_lambda <- direct$par
    se <- sqrt(direct$vcov[1, 1])
    loglik <- direct$loglik
    aic <- -2 * loglik + 2
  }
  z <- level_z(level)
  put(region, "exp_estimable", 1)
  put(region, "exp_lambda", exp(log_lambda))
  put(region, "exp_log_lambda_se", se)
  put(region, "exp_ci_wald", exp(log_lambda + c(-1, 1) * z * se))
  put(region, "exp_ci_profile", profile_interval(d, exp(log_lambda), loglik, level))
  put(region, "exp_loglik", loglik)
  put(region, "exp_aic", aic)
  invisible(loglik)
}

put_weibull <- function(region, d, level, exp_loglik, survreg_fit = NULL, direct = NULL) {
  if (is.null(survreg_fit) && is.null(direct)) {
    put(region, "weib_estimable", 0)
    return(invisible(NULL))
  }
  if (!is.null(survreg_fit)) {
    mu <- unname(coef(survreg_fit)); log_sigma <- log(survreg_fit$scale)
    vcov <- unname(survreg_fit$var); loglik <- survreg_fit$loglik[2]; aic <- AIC(survreg_fit)
  } else {
    mu <- direct$par[1]; log_sigma <- direct$par[2]
    vcov <- direct$vcov; loglik <- direct$loglik; aic <- -2 * loglik + 4
  }
  z <- level_z(level)
  se <- sqrt(diag(vcov))
  lrt <- 2 * (loglik - exp_loglik)
  put(region, "weib_estimable", 1)
  put(region, "weib_mu", mu)
  put(region, "weib_log_sigma", log_sigma)
  put(region, "weib_vcov", c(vcov[1, 1], vcov[1, 2], vcov[2, 1], vcov[2, 2]))
  put(region, "weib_shape", exp(-log_sigma))
  put(region, "weib_scale", exp(mu))
  put(region, "weib_shape_ci", exp(-(log_sigma + c(1, -1) * z * se[2])))
  put(region, "weib_scale_ci", exp(mu + c(-1, 1) * z * se[1]))
  put(region, "weib_loglik", loglik)
  put(region, "weib_aic", aic)
  put(region, "weib_lrt", lrt)
  put(region, "weib_lrt_p", pchisq(lrt, 1, lower.tail = FALSE))
}

# Without entry: survreg is the reference, and the direct maximisation used
# for entry data must agree with it (a check of that route).
parametric_survreg <- function(region, d, level, weibull_ok) {
  control <- survreg.control(rel.tolerance = 1e-12, iter.max = 200)
  events <- sum(d$weight * d$event)
  if (events == 0) return(put_exponential(region, d, level))
  e <- survreg(Surv(time, event) ~ 1, data = d, weights = weight, dist = "exponential",
               control = control)
  exp_ll <- put_exponential(region, d, level, survreg_fit = e)
  de <- direct_fit(-unname(coef(e)), exponential_loglik, exponential_gradient, d)
  stopifnot(abs(de$par + coef(e)) < 1e-9, abs(de$loglik - e$loglik[2]) < 1e-9 * abs(de$loglik))
  if (!weibull_ok) return(put_weibull(region, d, level, exp_ll))
  w <- survreg(Surv(time, event) ~ 1, data = d, weights = weight, dist = "weibull",
               control = control)
  dw <- direct_fit(c(coef(e), 0), weibull_loglik, weibull_gradient, d)
  stopifnot(max(abs(dw$par - c(coef(w), log(w$scale)))) < 1e-8,
            abs(dw$loglik - w$loglik[2]) < 1e-10 * abs(dw$loglik),
            max(abs(dw$vcov - w$var) / abs(w$var)) < 1e-6)
  put_weibull(region, d, level, exp_ll, survreg_fit = w)
}

parametric_direct <- function(region, d, level, weibull_ok) {
  events <- sum(d$weight * d$event)
  if (events == 0) return(put_exponential(region, d, level))
  start <- log(events / sum(d$weight * (d$time - d$entry)))
  de <- direct_fit(start, exponential_loglik, exponential_gradient, d)
  exp_ll <- put_exponential(region, d, level, direct = de)
  if (!weibull_ok) return(put_weibull(region, d, level, exp_ll))
  dw <- direct_fit(c(-de$par, 0), weibull_loglik, weibull_gradient, d)
  put_weibull(region, d, level, exp_ll, direct = dw)
}

# ---- Kaplan-Meier ------------------------------------------------------------

put_km <- function(region, d, level) {
  for (type in c("log", "log-log", "plain")) {
    f <- if (any(d$entry > 0))
      survfit(Surv(entry, time, event) ~ 1, data = d, weights = weight, conf.type = type,
              conf.int = level, robust = FALSE)
    else
      survfit(Surv(time, event) ~ 1, data = d, weights = weight, conf.type = type,
              conf.int = level, robust = FALSE)
    if (type == "log") {  # the same for every conf.type
      put(region, "km_time", f$time)
      put(region, "km_n_risk", f$n.risk)
      put(region, "km_n_event", f$n.event)
      put(region, "km_n_censor", f$n.censor)
      put(region, "km_surv", f$surv)
      put(region, "km_std_err", f$std.err)
    }
    key <- paste0("km_", sub("-", "", type), "_")
    put(region, paste0(key, "lower"), f$lower)
    put(region, paste0(key, "upper"), f$upper)
    q <- quantile(f, 0.5)
    put(region, paste0(key, "median"), c(q$quantile, q$lower, q$upper))
  }
}

# ---- log-rank ------------------------------------------------------------------

expand_weights <- function(d) {
  stopifnot(all(d$weight == round(d$weight)))
  d[rep(seq_len(nrow(d)), d$weight), ]
}

# With delayed entry survdiff cannot be called on the data as they are, but
# the log-rank sums run over event times, each with its own risk set
# {entry < t <= time}: one stratum per event time t holding that risk set
# (every row at time t, an event if it ended in an event at t) makes
# survdiff's stratified sums exactly the delayed-entry test, hypergeometric
# variance and all.
risk_set_strata <- function(e) {
  times <- sort(unique(e$time[e$event == 1]))
  do.call(rbind, lapply(seq_along(times), function(k) {
    at <- e[e$entry < times[k] & e$time >= times[k], ]
    data.frame(group = at$group, stratum = k, time = times[k],
               event = as.integer(at$event == 1 & at$time == times[k]))
  }))
}

survdiff_by_risk_sets <- function(d) {
  e <- expand_weights(d)
  e$group <- groups_of(e)
  s <- survdiff(Surv(time, event) ~ group + strata(stratum), data = risk_set_strata(e))
  list(obs = rowSums(s$obs), exp = rowSums(s$exp), var = s$var, chisq = s$chisq,
       df = sum(rowSums(s$exp) > 0) - 1, p = s$pvalue)
}

survdiff_plain <- function(d) {
  e <- expand_weights(d)
  e$group <- groups_of(e)
  s <- survdiff(Surv(time, event) ~ group, data = e)
  list(obs = s$obs, exp = s$exp, var = s$var, chisq = s$chisq,
       df = sum(s$exp > 0) - 1, p = s$pvalue)
}

# coxph at beta = 0 (iter.max = 0) on data without tied event times: the
# score test with Breslow ties is the log-rank test, O - E per group are the
# sums of the martingale residuals, and the information is V without the
# first group (its row and column follow, since the rows of V sum to 0).
coxph_logrank <- function(d) {
  e <- expand_weights(d)
  e$group <- groups_of(e)
  stopifnot(!anyDuplicated(e$time[e$event == 1]))
  f <- coxph(Surv(entry, time, event) ~ group, data = e, iter.max = 0, ties = "breslow")
  obs <- as.vector(tapply(e$event, e$group, sum))
  o_minus_e <- as.vector(tapply(residuals(f, type = "martingale"), e$group, sum))
  inner <- solve(f$var)
  k <- nlevels(e$group)
  v <- matrix(0, k, k)
  v[-1, -1] <- inner
  v[1, -1] <- -colSums(inner)
  v[-1, 1] <- -rowSums(inner)
  v[1, 1] <- sum(inner)
  list(obs = obs, exp = obs - o_minus_e, var = v, chisq = f$score, df = k - 1,
       p = pchisq(f$score, k - 1, lower.tail = FALSE))
}

same_test <- function(a, b) {
  stopifnot(max(abs(a$obs - b$obs)) < 1e-9, max(abs(a$exp - b$exp)) < 1e-9 * max(a$exp),
            max(abs(a$var - b$var)) < 1e-9 * max(abs(a$var)),
            abs(a$chisq - b$chisq) < 1e-9 * max(1, a$chisq), a$df == b$df)
}

put_test <- function(label, test) {
  put(label, "lr_obs", test$obs)
  put(label, "lr_exp", test$exp)
  put(label, "lr_var", t(test$var))
  put(label, "lr_chisq", test$chisq)
  put(label, "lr_df", test$df)
  put(label, "lr_p", test$p)
}

put_logrank <- function(d, method) {
  levels <- unique(d$region)
  test <- switch(method, survdiff = survdiff_plain, coxph = coxph_logrank,
                 risksets = survdiff_by_risk_sets)
  put_test("*", test(d))
  for (i in seq_along(levels)) for (j in seq_along(levels)) if (i < j) {
    pair <- d[d$region %in% levels[c(i, j)], ]
    put_test(paste0(levels[i], "|", levels[j]), test(pair))
  }
}

# ---- one dataset ---------------------------------------------------------------

fit_dataset <- function(name, d, level, logrank = c("survdiff", "coxph", "risksets", "none")) {
  logrank <- match.arg(logrank)
  # survfit, survdiff and coxph merge times closer than sqrt(eps) (timefix,
  # aeqSurv); we compare bits. Fixtures have no such near-ties.
  y <- Surv(d$entry, d$time, d$event)
  stopifnot(identical(aeqSurv(y), y))
  has_entry <- any(d$entry > 0)
  for (region in unique(d$region)) {
    r <- d[d$region == region, ]
    weibull_ok <- length(unique(r$time[r$event == 1])) >= 2
    if (has_entry) parametric_direct(region, r, level, weibull_ok)
    else parametric_survreg(region, r, level, weibull_ok)
    put_km(region, r, level)
  }
  if (logrank != "none") put_logrank(d, logrank)
  write_dataset(name, d, level)
}

# Checks of the delayed-entry routes: on data without entry the risk-set
# strata give survdiff's test; on data without tied event times coxph's
# score test gives the risk-set strata's.
check_logrank_routes <- function(d) {
  if (any(d$entry > 0)) same_test(coxph_logrank(d), survdiff_by_risk_sets(d))
  else same_test(survdiff_plain(d), survdiff_by_risk_sets(d))
}

# ---- the datasets ----------------------------------------------------------------

# Several regions, Weibull and exponential lifetimes, integer times (ties).
regions <- rbind(
  integer_lifetimes("system", 80, 1.4, 120, 20, 300),
  integer_lifetimes("scratchpad", 90, 1.0, 15, 5, 100),
  integer_lifetimes("retrieval", 70, 0.7, 60, 10, 400),
  integer_lifetimes("tool_out", 60, 1.0, 40, 10, 200))
check_logrank_routes(regions)
fit_dataset("regions", regions, 0.95)

# Integer case weights (aggregated identical tokens).
weights_int <- rbind(
  integer_lifetimes("plan", 70, 1.2, 50, 10, 150, sample(1:4, 70, TRUE)),
  integer_lifetimes("user", 60, 0.9, 30, 10, 150, sample(1:4, 60, TRUE)),
  integer_lifetimes("tool_in", 50, 1.0, 40, 10, 150, sample(1:4, 50, TRUE)))
check_logrank_routes(weights_int)
fit_dataset("weights_int", weights_int, 0.95)

# Non-integer weights, another level; no R log-rank for these (survdiff has no
# weights, and frequency weights cannot be expanded).
weights_frac <- rbind(
  integer_lifetimes("user", 60, 1.3, 40, 10, 120, round(runif(60, 0.1, 3), 3)),
  integer_lifetimes("plan", 50, 0.8, 70, 10, 200, round(runif(50, 0.1, 3), 3)),
  integer_lifetimes("scratchpad", 60, 1.0, 12, 5, 60, round(runif(60, 0.1, 3), 3)))
fit_dataset("weights_frac", weights_frac, 0.90, logrank = "none")

# Delayed entry, continuous times, no tied event times (Breslow = log-rank).
repeat {
  entry <- rbind(
    truncated_lifetimes("system", 35, 1.3, 80, 0.6, 40),
    truncated_lifetimes("retrieval", 30, 0.8, 60, 0.5, 30),
    truncated_lifetimes("scratchpad", 40, 1.0, 20, 0.7, 15))
  if (!anyDuplicated(entry$time[entry$event == 1])) break
}
check_logrank_routes(entry)
fit_dataset("entry", entry, 0.95, logrank = "coxph")

# Delayed entry with integer times, entries and weights: ties everywhere,
# including entries equal to event times (not at risk then). "revive": the
# curve reaches 0 and later entrants are still at risk.
entry_ties <- function(region, n, shape, scale) {
  d <- truncated_lifetimes(region, n, shape, scale, 0.6, 12)
  d$entry <- floor(d$entry)
  d$time <- pmax(ceiling(d$time), d$entry + 1)
  d$weight <- sample(1:3, n, TRUE)
  d
}
entry_ties_data <- rbind(
  entry_ties("plan", 60, 1.2, 25),
  entry_ties("tool_out", 60, 0.9, 15),
  data.frame(region = "revive", entry = c(0, 3, 3, 4, 2), time = c(2, 5, 6, 7, 4),
             event = c(1, 1, 0, 1, 0), weight = c(1, 1, 1, 2, 1)))
fit_dataset("entry_ties", entry_ties_data, 0.95, logrank = "risksets")

# Edge cases, by hand.
edge_region <- function(region, time, event, weight = rep(1, length(time)))
  data.frame(region = region, entry = 0, time = time, event = event, weight = weight)
edge <- rbind(
  edge_region("none", c(3, 5, 5, 8, 13), c(0, 0, 0, 0, 0)),          # no events
  edge_region("one", c(4, 6, 9, 2), c(1, 0, 0, 0)),                  # one event
  edge_region("single", 7, 1),                                       # a single row
  edge_region("tied2", c(5, 5, 8, 3), c(1, 1, 0, 0)),                # 1 distinct event time
  edge_region("half", c(1, 2, 3, 5), c(1, 1, 0, 1)),                 # S = 0.5 on [2, 5)
  edge_region("half_end", c(1, 2, 3, 4), c(1, 1, 0, 0)),             # S = 0.5 to the end
  edge_region("never", 1:10, c(1, 1, rep(0, 8))),                    # S never <= 0.5
  edge_region("late", 1:6, c(0, 0, 1, 1, 1, 1)),                     # S = 1 at censorings
  edge_region("early_cens", c(0.5, 0.5), c(0, 0), c(1, 2)))          # never at risk at events
fit_dataset("edge", edge, 0.95)

# ---- provenance ------------------------------------------------------------------
# What made these files, for fixtures/README.md: this script and the R and
# survival versions it ran with (fixture.c reads only <dataset>.csv and .tsv).
writeLines(c("script: tests/fit/make_fixtures.R",
             paste0("R: ", R.version$major, ".", R.version$minor),
             paste0("survival: ", format(packageVersion("survival"))),
             paste0("RNG: ", paste(RNGkind(), collapse = " "), " (RNGversion 4.2.0, seed 20240611)"),
             paste0("platform: ", R.version$platform)),
           file.path(out_dir, "VERSIONS"))

cat("wrote", length(list.files(out_dir)), "files to", out_dir, "\n")
