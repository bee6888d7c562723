/* What this CPU runs (CPUID, XGETBV) and which of our kernel paths that
 * allows: the one reading that picks the back end's kernels, the OpenBLAS
 * core (blas_core.c) and what `devices` prints. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#define MD_HAVE_X86 1
#include <cpuid.h>
#else
#define MD_HAVE_X86 0
#endif

/* CPUID and XGETBV directly, not GCC's __builtin_cpu_supports: clang before
 * version 15 does not know the "f16c" feature name. Bit positions: the Intel SDM,
 * vol. 2A, CPUID (leaf 1 ECX, leaf 7 subleaf 0 EBX, subleaf 1 EAX); XCR0's
 * state components: vol. 1, ch. 13 (SSE 1, AVX 2, opmask 5, ZMM_Hi256 6,
 * Hi16_ZMM 7). */
md_cpu_facts md_cpu_read_facts(void) {
  md_cpu_facts f = {0};
#if MD_HAVE_X86
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return f;
  unsigned max_leaf = eax;
  /* The vendor string is EBX, EDX, ECX: "GenuineIntel", "AuthenticAMD". */
  if (ebx == 0x756e6547u && edx == 0x49656e69u && ecx == 0x6c65746eu) f.vendor = MD_CPU_VENDOR_INTEL;
  else if (ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u) f.vendor = MD_CPU_VENDOR_AMD;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  /* EAX: model bits 4-7, family 8-11, extended model 16-19, extended
   * family 20-27 (Intel SDM vol. 2A, CPUID leaf 1; AMD APM vol. 3, E.3.2). */
  unsigned base_family = (eax >> 8) & 0xfu, base_model = (eax >> 4) & 0xfu;
  f.family = (int)(base_family == 0xfu ? base_family + ((eax >> 20) & 0xffu) : base_family);
  f.model = (int)(base_family == 0xfu || base_family == 0x6u ? base_model + (((eax >> 16) & 0xfu) << 4)
                                                              : base_model);
  const unsigned osxsave = 1u << 27;
  if (!(ecx & osxsave)) return f; /* XGETBV unavailable: no AVX of any kind */
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  (void)xcr0_hi;
  bool ymm = (xcr0_lo & 0x6u) == 0x6u, zmm = ymm && (xcr0_lo & 0xe0u) == 0xe0u;
  if (!ymm) return f;
  f.avx = (ecx & (1u << 28)) != 0;
  f.fma = (ecx & (1u << 12)) != 0;
  f.f16c = (ecx & (1u << 29)) != 0;
  if (max_leaf < 7 || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  unsigned leaf7_subleaves = eax;
  f.avx2 = (ebx & (1u << 5)) != 0;
  if (zmm) {
    f.avx512f = (ebx & (1u << 16)) != 0;
    f.avx512dq = (ebx & (1u << 17)) != 0;
    f.avx512cd = (ebx & (1u << 28)) != 0;
    f.avx512bw = (ebx & (1u << 30)) != 0;
    f.avx512vl = (ebx & (1u << 31)) != 0;
    if (leaf7_subleaves >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx))
      f.avx512_bf16 = (eax & (1u << 5)) != 0;
  }
#endif
  return f;
}

/* AVX2 needs AVX2, FMA and F16C (and the YMM state, which the facts
 * already require); AVX-512 needs F, BW, VL and DQ on top (x86-64-v4). */
md_cpu_isa md_cpu_isa_for(const md_cpu_facts *f) {
  if (!(f->avx2 && f->fma && f->f16c)) return MD_CPU_ISA_PORTABLE;
  if (f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq) return MD_CPU_ISA_AVX512;
  return MD_CPU_ISA_AVX2;
}

bool md_cpu_amd_zen5_or_later(const md_cpu_facts *f) {
  return f->vendor == MD_CPU_VENDOR_AMD && f->family >= 26;
}

bool md_cpu_bf16_gemm_preferred(const md_cpu_facts *f) {
  return f->vendor == MD_CPU_VENDOR_AMD && f->avx512_bf16 && f->avx512f && f->avx512bw &&
         f->avx512vl && f->avx512dq;
}

bool md_cpu_amd_zen5_or_later_once(void) {
  /* 0: not read yet, 1: no, 2: yes. Racing first readers both read CPUID
   * and store the same value. */
  static _Atomic int cached;
  int v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (!v) {
    md_cpu_facts f = md_cpu_read_facts();
    v = md_cpu_amd_zen5_or_later(&f) ? 2 : 1;
    atomic_store_explicit(&cached, v, memory_order_relaxed);
  }
  return v == 2;
}

const char *md_cpu_vendor_name(md_cpu_vendor vendor) {
  switch (vendor) {
    case MD_CPU_VENDOR_INTEL: return "Intel";
    case MD_CPU_VENDOR_AMD: return "AMD";
    default: return "other";
  }
}

md_cpu_isa md_cpu_detect_isa(void) {
  md_cpu_facts f = md_cpu_read_facts();
  return md_cpu_isa_for(&f);
}

static const char *const isa_names[] = {"portable", "avx2", "avx512"};

const char *md_cpu_isa_name(md_cpu_isa isa) {
  return (unsigned)isa < sizeof isa_names / sizeof isa_names[0] ? isa_names[isa] : "unknown";
}

int md_cpu_kernel_paths(md_cpu_kernels paths[3]) {
  md_cpu_isa best = md_cpu_detect_isa();
  int n = 0;
  for (int isa = MD_CPU_ISA_PORTABLE; isa <= (int)best; isa++) paths[n++] = (md_cpu_kernels)(isa + 1);
  return n;
}

bool md_cpu_kernels_parse(const char *name, md_cpu_kernels *kernels) {
  if (!strcmp(name, "best")) {
    *kernels = MD_CPU_KERNELS_BEST;
    return true;
  }
  for (size_t i = 0; i < sizeof isa_names / sizeof isa_names[0]; i++)
    if (!strcmp(name, isa_names[i])) {
      *kernels = (md_cpu_kernels)(i + 1);
      return true;
    }
  return false;
}

char *md_cpu_facts_describe(const md_cpu_facts *f, char *out, size_t size) {
  const struct { bool present; const char *name; } features[] = {
      {f->avx, "avx"},           {f->avx2, "avx2"},         {f->fma, "fma"},
      {f->f16c, "f16c"},         {f->avx512f, "avx512f"},   {f->avx512bw, "avx512bw"},
      {f->avx512vl, "avx512vl"}, {f->avx512dq, "avx512dq"}, {f->avx512cd, "avx512cd"},
      {f->avx512_bf16, "avx512_bf16"},
  };
  size_t used = 0;
  if (size) out[0] = '\0';
  for (size_t i = 0; i < sizeof features / sizeof features[0]; i++) {
    if (!features[i].present) continue;
    int w = snprintf(out + used, size > used ? size - used : 0, "%s%s", used ? " " : "", features[i].name);
    if (w > 0) used += (size_t)w;
  }
  if (!used) snprintf(out, size, "none");
  return out;
}
