/* What the generated-case programs (colls.c, nbc.c) draw their cases from and hash their data
 * with: the same sequence on every rank, and a 64-bit FNV-1a hash of a buffer's bytes. */
#pragma once

#include <stddef.h>
#include <stdint.h>

static uint64_t state;
static uint64_t draw(uint64_t n) { /* the same sequence on every rank (an LCG, Knuth's MMIX constants) */
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (state >> 33) % n;
}

static uint64_t fnv1a(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++)
    h = (h ^ ((const unsigned char*)p)[i]) * 1099511628211ULL;
  return h;
}
