"""What bench/inference_bench prints, read back by the bench scripts' summaries
(bench/inference_bench.sh, bench/llama_cpp_bench.sh)."""

# The bandwidth readings (`inference_bench limits` and `bandwidth`); the limit
# is the best of them (bandwidth()).
BANDWIDTH = ("triad_gbs", "read_gbs", "sgemv_gbs")
# The limits `inference_bench limits` measures; a script reads them before and
# after its runs and keeps the better reading of each.
LIMITS = ("fma_peak_gflops",) + BANDWIDTH + ("sgemm_gflops",)
# Only on CPUs with AVX-512 BF16.
OPTIONAL_LIMITS = ("bf16_dot_peak_gflops", "bf16_gemm_gflops")


def keyvals(path):
    """The "key value" lines of a file as a dict of stripped strings."""
    with open(path) as f:
        return {k: v.strip() for k, v in (line.split(None, 1) for line in f if line.strip())}


def depth_rows(path):
    """The "depth D off_s ... " lines of `inference_bench depth`, in order, as
    dicts of floats."""
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] == "depth":
                rows.append({k: float(v) for k, v in zip(parts[0::2], parts[1::2])})
    return rows


def better_limits(before_path, after_path, *between_paths):
    """The limits read before the runs, each measured figure replaced by the
    best of the readings (after the runs, and any `inference_bench
    bandwidth` readings between them): on a shared or virtual machine one
    reading can catch a slow moment."""
    before = keyvals(before_path)
    for path in (after_path,) + between_paths:
        other = keyvals(path)
        for key in LIMITS + OPTIONAL_LIMITS:
            if key in before and key in other:
                before[key] = str(max(float(before[key]), float(other[key])))
    return before


def bandwidth(readings):
    """The bandwidth limit of one set of readings (GB/s): the best of the
    triad, the read-only stream and the f32 sgemv."""
    return max(float(readings[key]) for key in BANDWIDTH)
