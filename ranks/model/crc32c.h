/* CRC-32C (Castagnoli), the checksum of every dataset in a model file.
 * Uses the SSE4.2 crc32 instruction where the CPU has it (about 8 bytes per
 * cycle and stream), a table otherwise; both give the same value. */
#ifndef RANK_CRC32C_H
#define RANK_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues a CRC: crc = crc32c(0, a, n) then crc32c(crc, b, m)
 * equals the CRC of a followed by b. */
uint32_t crc32c(uint32_t crc, const void *data, size_t n);

/* The CRC of a followed by b from crc_a = CRC(a), crc_b = CRC(b) and the
 * length of b alone, without the data: pieces of one dataset can be
 * checksummed by different threads and joined (O(log len_b) 32x32 GF(2)
 * matrix products). */
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

#endif
