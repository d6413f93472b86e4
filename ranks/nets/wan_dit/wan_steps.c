/* The block's steps and their weights, and the step log (see wan_steps.h). */
#include "wan_steps.h"

#include <stddef.h>

#define T(field) WAN_BLOCK_T_##field
#define STEP(id, nm, n, ...) [WAN_STEP_##id] = {.name = nm, .nweights = n, .w = {__VA_ARGS__}}

const wan_step_desc wan_steps[WAN_STEP_COUNT] = {
    STEP(CROSS_K, "cross_k", 3, T(cross_attn_k_w), T(cross_attn_k_b), T(cross_attn_norm_k_w)),
    STEP(CROSS_V, "cross_v", 2, T(cross_attn_v_w), T(cross_attn_v_b)),
    STEP(MODULATION, "modulation", 1, T(modulation)),
    STEP(NORM1, "norm1", 0, 0),
    STEP(SELF_K, "self_k", 3, T(self_attn_k_w), T(self_attn_k_b), T(self_attn_norm_k_w)),
    STEP(SELF_V, "self_v", 2, T(self_attn_v_w), T(self_attn_v_b)),
    STEP(SELF_Q, "self_q", 3, T(self_attn_q_w), T(self_attn_q_b), T(self_attn_norm_q_w)),
    STEP(SELF_ATTN, "self_attn", 0, 0),
    STEP(SELF_O, "self_o", 2, T(self_attn_o_w), T(self_attn_o_b)),
    STEP(GATE1, "gate1", 0, 0),
    STEP(NORM3, "norm3", 2, T(norm3_w), T(norm3_b)),
    STEP(CROSS_Q, "cross_q", 3, T(cross_attn_q_w), T(cross_attn_q_b), T(cross_attn_norm_q_w)),
    STEP(CROSS_ATTN, "cross_attn", 0, 0),
    STEP(CROSS_O, "cross_o", 2, T(cross_attn_o_w), T(cross_attn_o_b)),
    STEP(ADD2, "add2", 0, 0),
    STEP(NORM2, "norm2", 0, 0),
    STEP(FFN_0, "ffn_0", 2, T(ffn_0_w), T(ffn_0_b)),
    STEP(FFN_2, "ffn_2", 2, T(ffn_2_w), T(ffn_2_b)),
    STEP(GATE2, "gate2", 0, 0),
};

/* Off unless a test attaches a log; the forward runs on one host thread. */
static wan_step_log *g_log;

void wan_step_log_attach(wan_step_log *log) { g_log = log; }

int wan_step_logging(void) { return g_log != NULL; }

void wan_step_begin(wan_step s) {
  if (!g_log) return;
  if (g_log->n < WAN_STEP_LOG_MAX) g_log->e[g_log->n] = (wan_step_entry){.step = s};
  g_log->n++;
}

void wan_step_weight(int t) {
  if (!g_log || g_log->n > WAN_STEP_LOG_MAX) return;
  wan_step_entry *e = g_log->n ? &g_log->e[g_log->n - 1] : NULL;
  if (e && e->nweights < WAN_STEP_MAX_WEIGHTS + 1)
    e->w[e->nweights++] = t;
  else
    g_log->stray = 1;
}
