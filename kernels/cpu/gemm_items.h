/* The work items of a group of prompt products of one x, shared by the
 * CPU back end's own GEMMs (gemm_f32.c, gemm_bf16.c): each product's
 * blocks of `cols_per_item` outputs by blocks of x's panels, product by
 * product, at least `min_items` in all where x has the panels, splitting
 * x's panels (of every product alike) when the outputs are few. Items are
 * handed to threads as they come free; the split never changes a sum. */
#ifndef MD_KERNELS_CPU_GEMM_ITEMS_H
#define MD_KERNELS_CPU_GEMM_ITEMS_H

#include <stdint.h>

#define MD_GEMM_ITEMS_MAX_PRODUCTS 4

typedef struct md_gemm_items {
  int64_t first_block[MD_GEMM_ITEMS_MAX_PRODUCTS + 1]; /* product o's first output block */
  int64_t cols_per_item, panels, row_blocks, per_block;
  int64_t count; /* items in all */
} md_gemm_items;

/* One item: product `product`, outputs from `col0`, x's panels
 * [panel0, panel1). */
typedef struct md_gemm_item {
  int product;
  int64_t col0, panel0, panel1;
} md_gemm_item;

/* rows[o]: product o's outputs, o < count (1 .. MD_GEMM_ITEMS_MAX_PRODUCTS);
 * panels >= 1. */
static inline md_gemm_items md_gemm_items_plan(const int64_t *rows, int count,
                                               int64_t cols_per_item, int64_t panels,
                                               int64_t min_items) {
  md_gemm_items p = {.cols_per_item = cols_per_item, .panels = panels};
  int64_t col_blocks = 0;
  for (int o = 0; o < count; o++) {
    p.first_block[o] = col_blocks;
    col_blocks += (rows[o] + cols_per_item - 1) / cols_per_item;
  }
  p.first_block[count] = col_blocks;
  int64_t row_blocks = (min_items + col_blocks - 1) / col_blocks;
  if (row_blocks > panels) row_blocks = panels;
  if (row_blocks < 1) row_blocks = 1;
  p.per_block = (panels + row_blocks - 1) / row_blocks;
  p.row_blocks = (panels + p.per_block - 1) / p.per_block;
  p.count = col_blocks * p.row_blocks;
  return p;
}

static inline md_gemm_item md_gemm_items_at(const md_gemm_items *p, int64_t item) {
  int64_t cb = item / p->row_blocks, rb = item % p->row_blocks;
  md_gemm_item it = {.product = 0};
  while (cb >= p->first_block[it.product + 1]) it.product++;
  it.col0 = (cb - p->first_block[it.product]) * p->cols_per_item;
  it.panel0 = rb * p->per_block;
  it.panel1 = it.panel0 + p->per_block < p->panels ? it.panel0 + p->per_block : p->panels;
  return it;
}

#endif
