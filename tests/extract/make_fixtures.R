#!/usr/bin/env Rscript
# Fixtures for tests/extract/test_extract_fixtures.c.
#
# Generates a small seeded synthetic attention dataset (several episodes of
# prompt tokens in known regions plus teacher-forced decoded tokens), then
# computes, from the definitions of memdecay-calibrate(1), EXTRACT, and the decisions
# written in fit/extract/lifetimes.h and fit/extract/attention_norm.h:
#   events (estimands last-use and gap), base priorities, the EWMA of the
#   uniform-relative attention, kappa (quantile type 7), alpha (median),
#   the per-region mean uniform-relative attention and its curve by age.
#
# Run from the source root:  Rscript tests/extract/make_fixtures.R
# Writes tests/extract/fixtures/*.csv, and fixtures/VERSIONS with the R
# version it ran with. Needs base R only.

out_dir <- file.path("tests", "extract", "fixtures")
dir.create(out_dir, showWarnings = FALSE, recursive = TRUE)
set.seed(20240611)

fmt <- function(x) ifelse(is.na(x), "NA", sprintf("%.17g", x))

# ---- regions --------------------------------------------------------------
regions <- data.frame(
  region = c("system", "user", "retrieval", "tool_out", "plan", "scratchpad", "tool_in"),
  pinned = c(1L, 0L, 0L, 0L, 0L, 0L, 0L))   # tool_in never occurs: an empty region
# Per region: logit level, strength of the fresh-token bump, its decay (steps).
level <- c(system = 0.8, user = 0.2, retrieval = 0.0, tool_out = -0.3, plan = 0.3,
           scratchpad = -0.2)
bump <- c(system = 0.5, user = 1.5, retrieval = 2.0, tool_out = 1.8, plan = 1.0,
          scratchpad = 2.5)
decay <- c(system = 60, user = 12, retrieval = 25, tool_out = 6, plan = 15, scratchpad = 3)

# ---- the synthetic attention dataset ---------------------------------------
# Attention values are multiples of 2^-20, so float32 holds them exactly and
# the C side reads the very numbers used here.
grid <- 2^20

make_episode <- function(id, n_prompt_target, n_steps, continuation_region) {
  parts <- c(system = sample(3:5, 1), user = sample(3:6, 1), retrieval = sample(0:8, 1),
             tool_out = sample(0:7, 1), plan = sample(0:3, 1))
  parts["scratchpad"] <- max(1, n_prompt_target - sum(parts))
  prompt_region <- rep(names(parts), times = parts)
  n_prompt <- length(prompt_region)
  token_region <- c(prompt_region, rep(continuation_region, n_steps))
  birth <- c(rep(-1L, n_prompt), 0:(n_steps - 1))
  n_tokens <- length(birth)
  strength <- rexp(n_tokens)                      # how much each token will be used
  A <- matrix(0, n_steps, n_tokens)
  for (t in 0:(n_steps - 1)) {
    vis <- which(birth <= t)
    origin <- pmax(birth[vis], 0)
    age <- t - origin
    r <- token_region[vis]
    logit <- level[r] + bump[r] * strength[vis] * exp(-age / decay[r]) + rnorm(length(vis))
    logit[vis == 1] <- logit[vis == 1] + 3       # an attention sink
    logit[birth[vis] == t] <- logit[birth[vis] == t] + 2.5   # the query attends to itself
    p <- exp(logit - max(logit))
    p <- p / sum(p)
    a <- round(p * grid) / grid
    # exact zeros now and then, and values right at the thresholds when n_t is
    # a power of two: a_hat = 1 and 2 exactly, and one just under 1
    a[runif(length(a)) < 0.03] <- 0
    n_t <- length(vis)
    if (n_t %in% c(16, 32, 64)) {
      pick <- sample(which(birth[vis] < t), 3)
      a[pick] <- c(1 / n_t, 2 / n_t, (grid / n_t - 1) / grid)
    }
    A[t + 1, vis] <- a
  }
  list(id = id, A = A, region = token_region, birth = birth)
}

episodes <- list(
  make_episode("ep-01", 20, 30, "scratchpad"),
  make_episode("ep-02", 28, 36, "scratchpad"),
  make_episode("ep-03", 14, 24, "plan"),
  make_episode("ep-04", 33, 40, "scratchpad"),
  make_episode("ep-05", 22, 18, "scratchpad"),
  make_episode("ep-06", 40, 44, "scratchpad"))

# Long format: only the (step, token) pairs where the token is visible; the
# rest of the matrix is 0 by definition.
long <- do.call(rbind, lapply(episodes, function(ep) {
  S <- nrow(ep$A)
  cells <- expand.grid(token = seq_along(ep$birth) - 1L, step = 0:(S - 1))
  cells <- cells[ep$birth[cells$token + 1] <= cells$step, ]
  data.frame(episode = ep$id, step = cells$step, token = cells$token,
             region = ep$region[cells$token + 1], birth = ep$birth[cells$token + 1],
             attn = ep$A[cbind(cells$step + 1, cells$token + 1)])
}))
long <- long[order(match(long$episode, sapply(episodes, `[[`, "id")), long$step, long$token), ]
writeLines(c("episode,step,token,region,birth,attn",
             sprintf("%s,%d,%d,%s,%d,%s", long$episode, long$step, long$token, long$region,
                     long$birth, fmt(long$attn))),
           file.path(out_dir, "attn_synthetic.csv"))
write.csv(regions, file.path(out_dir, "regions.csv"), row.names = FALSE, quote = FALSE)

# ---- the reference computations, from the definitions ---------------------
# Uniform-relative attention: a_t(i) times the tokens visible at step t, which
# are the tokens born at or before t.
relative <- function(ep) {
  S <- nrow(ep$A)
  n_visible <- sapply(0:(S - 1), function(t) sum(ep$birth <= t))
  stopifnot(all(n_visible == sum(ep$birth < 0) + 1:S))
  ep$A * n_visible      # recycles down the columns: row t scaled by n_t
}

# Steps (0-based) at which token j is refreshed: a_hat >= tau at a step after
# its own birth step (prompt tokens: any step).
refresh_steps <- function(ep, R, j, tau) {
  steps <- 0:(nrow(R) - 1)
  allowed <- if (ep$birth[j] < 0) steps >= 0 else steps > ep$birth[j]
  steps[allowed & R[, j] >= tau]
}

events_for <- function(ep, R, j, tau, guard, estimand) {
  S <- nrow(R)
  r <- refresh_steps(ep, R, j, tau)
  if (length(r) == 0) return(NULL)
  origin <- max(ep$birth[j], 0)
  if (estimand == "last-use") {
    last <- max(r)
    if (last >= S - guard) { time <- S - origin; event <- 0L }
    else { time <- last - origin + 1; event <- 1L }
  } else {
    time <- c(diff(r), S - max(r))
    event <- c(rep(1L, length(r) - 1), 0L)
  }
  data.frame(episode = ep$id, pos = j - 1L, region = ep$region[j], time = time, event = event)
}

ewma <- function(x, beta) {
  as.numeric(stats::filter((1 - beta) * x, beta, method = "recursive"))
}

params <- data.frame(set = c("A", "B"), tau = c(1, 2), guard = c(4L, 0L),
                     beta = c(0.9, 0.5), quantile = c(0.95, 0.5))
write.csv(params, file.path(out_dir, "params.csv"), row.names = FALSE, quote = FALSE)

rel <- lapply(episodes, relative)

for (s in seq_len(nrow(params))) {
  p <- params[s, ]
  for (estimand in c("last-use", "gap")) {
    ev <- do.call(rbind, Map(function(ep, R) {
      do.call(rbind, lapply(seq_along(ep$birth), function(j)
        events_for(ep, R, j, p$tau, p$guard, estimand)))
    }, episodes, rel))
    ev$entry <- 0
    ev$weight <- 1
    write.csv(ev, file.path(out_dir, sprintf("events_%s_%s.csv", p$set, estimand)),
              row.names = FALSE, quote = FALSE)
  }

  # Per token: observed (some step could refresh it), refreshed, final EWMA,
  # and all EWMA values of unpinned tokens for kappa.
  tok <- do.call(rbind, Map(function(ep, R) {
    S <- nrow(R)
    do.call(rbind, lapply(seq_along(ep$birth), function(j) {
      origin <- max(ep$birth[j], 0)
      e <- ewma(R[(origin + 1):S, j], p$beta)
      data.frame(episode = ep$id, pos = j - 1L, region = ep$region[j],
                 observed = ep$birth[j] < S - 1,
                 refreshed = length(refresh_steps(ep, R, j, p$tau)) > 0,
                 ewma_last = e[length(e)])
    }))
  }, episodes, rel))
  all_e <- unlist(Map(function(ep, R) {
    S <- nrow(R)
    unlist(lapply(which(!(ep$region %in% regions$region[regions$pinned == 1])), function(j)
      ewma(R[(max(ep$birth[j], 0) + 1):S, j], p$beta)))
  }, episodes, rel))

  stats <- do.call(rbind, lapply(seq_len(nrow(regions)), function(k) {
    in_r <- tok$region == regions$region[k]
    observed <- sum(tok$observed[in_r])
    refreshed <- sum(tok$refreshed[in_r] & tok$observed[in_r])
    share <- if (observed > 0) refreshed / observed else NA
    data.frame(region = regions$region[k], tokens = sum(in_r), observed = observed,
               refreshed = refreshed, share = share,
               base_priority = if (regions$pinned[k] == 1) 1 else share)
  }))
  unpinned_shares <- stats$share[regions$pinned == 0 & !is.na(stats$share)]
  kappa <- quantile(all_e, p$quantile, type = 7, names = FALSE)
  alpha <- median(unpinned_shares)
  lines <- c("set,quantity,region,value",
             sprintf("%s,kappa_samples,,%d", p$set, length(all_e)),
             sprintf("%s,kappa,,%s", p$set, fmt(kappa)),
             sprintf("%s,alpha,,%s", p$set, fmt(alpha)),
             sprintf("%s,alpha_regions,,%d", p$set, length(unpinned_shares)))
  for (q in c("tokens", "observed", "refreshed", "share", "base_priority"))
    lines <- c(lines, sprintf("%s,%s,%s,%s", p$set, q, stats$region, fmt(stats[[q]])))
  writeLines(lines, file.path(out_dir, sprintf("stats_%s.csv", p$set)))
  writeLines(c("episode,pos,ewma_last", sprintf("%s,%d,%s", tok$episode, tok$pos,
                                                fmt(tok$ewma_last))),
             file.path(out_dir, sprintf("ewma_%s.csv", p$set)))
}

# ---- mean uniform-relative attention: per region, and by age ---------------
# (independent of tau, guard, beta and q)
pairs <- do.call(rbind, Map(function(ep, R) {
  S <- nrow(R)
  cells <- expand.grid(t = 0:(S - 1), j = seq_along(ep$birth))
  cells <- cells[ep$birth[cells$j] <= cells$t, ]
  data.frame(region = ep$region[cells$j], age = cells$t - pmax(ep$birth[cells$j], 0),
             a_hat = R[cbind(cells$t + 1, cells$j)])
}, episodes, rel))
means <- aggregate(a_hat ~ region, pairs, mean)
counts <- aggregate(a_hat ~ region, pairs, length)
writeLines(c("region,pairs,mean",
             sprintf("%s,%d,%s", means$region, counts$a_hat, fmt(means$a_hat))),
           file.path(out_dir, "mean_relative_attention.csv"))
curve_mean <- aggregate(a_hat ~ region + age, pairs, mean)
curve_n <- aggregate(a_hat ~ region + age, pairs, length)
curve <- merge(curve_mean, curve_n, by = c("region", "age"), suffixes = c("", "_n"))
curve <- curve[order(curve$region, curve$age), ]
writeLines(c("region,age,pairs,mean",
             sprintf("%s,%d,%d,%s", curve$region, curve$age, curve$a_hat_n, fmt(curve$a_hat))),
           file.path(out_dir, "curve.csv"))

# ---- provenance -------------------------------------------------------------
# What made these files, for fixtures/README.md: this script and the R it ran
# with (sample() and the RNG depend on R's version; the tests read only the
# .csv files).
writeLines(c("script: tests/extract/make_fixtures.R",
             paste0("R: ", R.version$major, ".", R.version$minor),
             paste0("RNG: ", paste(RNGkind(), collapse = " "), " (seed 20240611)"),
             paste0("platform: ", R.version$platform)),
           file.path(out_dir, "VERSIONS"))
