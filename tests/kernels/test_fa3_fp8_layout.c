/* fa3-fp8's key order (kern_attn_backend.h: KERN_ATTN_FP8_SLOT,
 * KERN_ATTN_FP8_P_SRC) against the register layouts of the PTX ISA's wgmma
 * tables, written here from the tables, not from the kernel:
 *
 * - the fp32 accumulator D of m64nNk16 / m64nNk32 (per warp, 16 rows):
 *   thread lane holds, for each 8-column chunk i, register 4i + 2h + e =
 *   row lane / 4 + 8h, column 8i + 2 (lane % 4) + e;
 * - the 8-bit A operand of m64nNk32 from registers (.e4m3, .s8): thread
 *   lane's register r (0..3), byte b (0..3, the low byte first) = row
 *   lane / 4 + 8 (r % 2), k = 4 (lane % 4) + b + 16 (r / 2).
 *
 * For every lane and every byte of the four A registers of a 32-key step,
 * the accumulator register KERN_ATTN_FP8_P_SRC packs there must sit on the
 * same row, and the key it holds must be the one the V^T copy placed at
 * that byte's k (KERN_ATTN_FP8_SLOT applied to each 16-group); the slot
 * map must be a bijection of 0..15; and every one of the 16 accumulator
 * registers of the step must be packed exactly once. A mismatch here is a
 * wrong P V on the GPU that no CPU build could show otherwise. */
#include <stdio.h>

#include "kern_attn_backend.h"
#include "sp_test.h"

int main(void) {
  sp_test_begin("kernels/fa3_fp8_layout");
  /* the slot map: a bijection of the 16 keys of a group */
  int seen[16] = {0};
  for (int w = 0; w < 16; w++) {
    const int s = KERN_ATTN_FP8_SLOT(w);
    CHECK(s >= 0 && s < 16, "key %d goes to slot %d, outside its group", w, s);
    if (s >= 0 && s < 16) seen[s]++;
  }
  for (int s = 0; s < 16; s++) CHECK(seen[s] == 1, "slot %d holds %d keys", s, seen[s]);
  /* key at each slot: the inverse map */
  int key_at[32];
  for (int w = 0; w < 32; w++) key_at[16 * (w / 16) + KERN_ATTN_FP8_SLOT(w % 16)] = w;

  int checked = 0;
  for (int lane = 0; lane < 32; lane++) {
    const int g = lane / 4, t = lane % 4;
    int used[16] = {0};
    for (int r = 0; r < 4; r++)
      for (int b = 0; b < 4; b++) {
        /* the A fragment byte (PTX table) */
        const int a_row = g + 8 * (r % 2), a_k = 4 * t + b + 16 * (r / 2);
        /* the accumulator register packed there, and what it holds (PTX
         * table): register 4i + 2h + e of the step's 16 */
        const int src = KERN_ATTN_FP8_P_SRC(r, b);
        CHECK(src >= 0 && src < 16, "lane %d r %d b %d: source register %d", lane, r, b, src);
        if (src < 0 || src >= 16) continue;
        used[src]++;
        const int i = src / 4, h = (src / 2) % 2, e = src % 2;
        const int d_row = g + 8 * h, d_col = 8 * i + 2 * t + e;
        CHECK(d_row == a_row, "lane %d r %d b %d: accumulator row %d in an A byte of row %d",
              lane, r, b, d_row, a_row);
        CHECK(key_at[a_k] == d_col,
              "lane %d r %d b %d: P of key %d meets V^T slot %d, which holds key %d", lane, r, b,
              d_col, a_k, key_at[a_k]);
        checked++;
      }
    for (int s = 0; s < 16; s++)
      CHECK(used[s] == 1, "lane %d: accumulator register %d packed %d times", lane, s, used[s]);
  }
  printf("fa3-fp8 key order: %d A-fragment bytes match the accumulator layout\n", checked);
  return sp_test_end();
}
