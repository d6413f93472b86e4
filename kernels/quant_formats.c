/* The table of quantized weight formats and their sizes (kern_quant.h). The
 * block sizes are kern_quant_decode.h's, where the layouts are. Pure: no
 * logging, no allocation (the GGUF reader and its fuzz target use it). */
#include <stdarg.h>
#include <stdio.h>
#include <strings.h>

#include "kern_quant.h"

static const kern_qfmt_info qfmt_table[KQ_COUNT] = {
    [KQ_F32] = {"fp32", 0, 1, 4, 0},
    [KQ_F16] = {"fp16", 1, 1, 2, 0},
    [KQ_BF16] = {"bf16", 30, 1, 2, 0},
    [KQ_E4M3_ROW] = {"fp8_e4m3", -1, 1, 1, 1},
    [KQ_I8_ROW] = {"int8", -1, 1, 1, 1},
    [KQ_Q8_0] = {"q8_0", 8, KQ_QK, KQ_Q8_0_BYTES, 0},
    [KQ_Q6_K] = {"q6_k", 14, KQ_QK_K, KQ_Q6_K_BYTES, 0},
    [KQ_Q5_K] = {"q5_k", 13, KQ_QK_K, KQ_Q5_K_BYTES, 0},
    [KQ_Q5_0] = {"q5_0", 6, KQ_QK, KQ_Q5_0_BYTES, 0},
    [KQ_Q5_1] = {"q5_1", 7, KQ_QK, KQ_Q5_1_BYTES, 0},
    [KQ_Q4_K] = {"q4_k", 12, KQ_QK_K, KQ_Q4_K_BYTES, 0},
    [KQ_Q4_0] = {"q4_0", 2, KQ_QK, KQ_Q4_0_BYTES, 0},
    [KQ_Q4_1] = {"q4_1", 3, KQ_QK, KQ_Q4_1_BYTES, 0},
    [KQ_Q3_K] = {"q3_k", 11, KQ_QK_K, KQ_Q3_K_BYTES, 0},
    [KQ_Q2_K] = {"q2_k", 10, KQ_QK_K, KQ_Q2_K_BYTES, 0},
};

const kern_qfmt_info *kern_qfmt_get(kern_qfmt f) {
  return (int)f >= 0 && (int)f < KQ_COUNT ? &qfmt_table[f] : NULL;
}

int kern_qfmt_from_name(const char *name, kern_qfmt *out) {
  for (int i = 0; i < KQ_COUNT; i++)
    if (strcasecmp(qfmt_table[i].name, name) == 0) {
      *out = (kern_qfmt)i;
      return 0;
    }
  return -1;
}

int kern_qfmt_from_ggml(int t, kern_qfmt *out) {
  for (int i = 0; i < KQ_COUNT; i++)
    if (qfmt_table[i].ggml_type >= 0 && qfmt_table[i].ggml_type == t) {
      *out = (kern_qfmt)i;
      return 0;
    }
  return -1;
}

const char *kern_qfmt_ggml_list(void) {
  return "F32, F16, BF16, Q8_0, Q6_K, Q5_K, Q5_0, Q5_1, Q4_K, Q4_0, Q4_1, Q3_K, Q2_K";
}

/* The table's rows by stored dtype (kern_dtype.h's order). */
static const kern_qfmt dtype_to_qfmt[KERN_DTYPE_COUNT] = {
    [KERN_DTYPE_BF16] = KERN_QFMT_BF16, [KERN_DTYPE_F32] = KERN_QFMT_F32,
    [KERN_DTYPE_E4M3] = KERN_QFMT_E4M3_ROW, [KERN_DTYPE_F16] = KERN_QFMT_F16,
    [KERN_DTYPE_I8] = KERN_QFMT_I8_ROW, [KERN_DTYPE_Q8_0] = KERN_QFMT_Q8_0,
    [KERN_DTYPE_Q6_K] = KERN_QFMT_Q6_K, [KERN_DTYPE_Q5_K] = KERN_QFMT_Q5_K,
    [KERN_DTYPE_Q5_0] = KERN_QFMT_Q5_0, [KERN_DTYPE_Q5_1] = KERN_QFMT_Q5_1,
    [KERN_DTYPE_Q4_K] = KERN_QFMT_Q4_K, [KERN_DTYPE_Q4_0] = KERN_QFMT_Q4_0,
    [KERN_DTYPE_Q4_1] = KERN_QFMT_Q4_1, [KERN_DTYPE_Q3_K] = KERN_QFMT_Q3_K,
    [KERN_DTYPE_Q2_K] = KERN_QFMT_Q2_K,
};

kern_qfmt kern_dtype_qfmt(kern_dtype d) {
  return (int)d >= 0 && (int)d < KERN_DTYPE_COUNT ? dtype_to_qfmt[d] : KERN_QFMT_COUNT;
}

kern_dtype kern_qfmt_dtype(kern_qfmt f) {
  for (int d = 0; d < KERN_DTYPE_COUNT; d++)
    if (dtype_to_qfmt[d] == f) return (kern_dtype)d;
  return KERN_DTYPE_COUNT;
}

static void qfmt_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

int kern_qfmt_bytes(kern_qfmt f, int64_t rows, int64_t cols, uint64_t *data_bytes,
                    uint64_t *scale_bytes, char *err, size_t errlen) {
  const kern_qfmt_info *in = kern_qfmt_get(f);
  if (!in) {
    qfmt_err(err, errlen, "unknown quantized format code %d", (int)f);
    return -1;
  }
  if (rows < 1 || cols < 1) {
    qfmt_err(err, errlen, "%s tensor of %lld x %lld: rows and cols must be >= 1", in->name,
             (long long)rows, (long long)cols);
    return -1;
  }
  if (cols % in->block) {
    qfmt_err(err, errlen, "%s tensor of %lld x %lld: cols %lld is not a multiple of the %s "
             "block of %d values", in->name, (long long)rows, (long long)cols, (long long)cols,
             in->name, in->block);
    return -1;
  }
  int64_t row_bytes, data, scale = 0;
  if (__builtin_mul_overflow(cols / in->block, (int64_t)in->block_bytes, &row_bytes) ||
      __builtin_mul_overflow(row_bytes, rows, &data) ||
      (in->row_scale && __builtin_mul_overflow(rows, (int64_t)sizeof(float), &scale)) ||
      data > INT64_MAX - scale) {
    qfmt_err(err, errlen, "%s tensor of %lld x %lld: its byte size overflows 64 bits", in->name,
             (long long)rows, (long long)cols);
    return -1;
  }
  *data_bytes = (uint64_t)data;
  *scale_bytes = (uint64_t)scale;
  return 0;
}
