/* The networks' one shape (ranks/nets/net.h): the registry and each
 * network's description as data, against published numbers.
 *
 * - The build knows four networks, wan_dit, umt5, wan_vae and wan_vae22, each with
 *   a CPU backend; a CUDA build has a CUDA backend for each, a CPU-only
 *   build none, and asking for one there is refused (NULL) while the CPU
 *   one is found.
 * - Each description's schema (its model file as data) has the model
 *   file's config attribute names (MODEL.md, UMT5.md and VAE.md "Model
 *   file"), each field inside the config struct; its published config (the
 *   DiT's three presets) passes its check, and one with a field zeroed
 *   does not.
 * - Its tensor list, for the published configs, has unique names and the
 *   published counts: the DiT's parameters of MODEL.md "Configs"
 *   (5,106,496, 1,418,996,800 and 14,288,491,584), the VAE decoder's 108
 *   tensors and 73,295,603 parameters (VAE.md), the Wan 2.2 VAE's 110 + 86
 *   tensors and 555,051,580 + 149,637,088 parameters (I2V.md), UMT5-XXL's 242 tensors and
 *   parameters written out here from its sizes (a 256,384 x 4096
 *   embedding, 24 layers of q, k, v, o 4096 x 4096, gate and fc1
 *   10240 x 4096, fc2 4096 x 10240, two norms of 4096 and 32 x 64
 *   buckets, the final norm).
 * - The text encoder's layout through its description is the one the
 *   planner counts (umt5_gpu_bytes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "net.h"
#include "plan.h"
#include "sp_test.h"
#include "t5_layout.h"
#include "umt5.h"
#include "umt5_gpu.h"
#include "wan_config.h"
#include "wan_dit.h"
#include "wan_schema.h"
#include "wan_vae.h"
#include "wan_vae22.h"

static void check_registry(void) {
  const net_desc *all[8];
  const int n = net_all(all, 8);
  const char *want[] = {"umt5", "wan_dit", "wan_vae", "wan_vae22"};
  CHECK(n == 4, "%d networks, want 4", n);
  for (int i = 0; i < n && i < 4; i++)
    CHECK(strcmp(all[i]->name, want[i]) == 0, "network %d is %s, want %s", i, all[i]->name,
          want[i]);
  const net_desc *nets[] = {wan_dit_net(), umt5_net(), wan_vae_net(), wan_vae22_net()};
#ifdef STATICPIPE_HAVE_CUDA
  const int cuda = 1;
#else
  const int cuda = 0;
#endif
  for (int i = 0; i < 4; i++) {
    const net_desc *d = nets[i];
    CHECK(net_backend_has(d, RANK_DEVICE_CPU) && net_backend_ops(d, RANK_DEVICE_CPU),
          "%s: no CPU backend", d->name);
    CHECK(net_backend_has(d, RANK_DEVICE_CUDA) == cuda, "%s: a CUDA backend %s", d->name,
          cuda ? "missing from a CUDA build" : "in a CPU-only build");
    if (!cuda) CHECK(net_backend_ops(d, RANK_DEVICE_CUDA) == NULL, "%s: CUDA found", d->name);
    CHECK(d->schema && d->schema->arch && d->noun && d->noun[0] && d->layout,
          "%s: incomplete", d->name);
    CHECK(d->schema && net_schema_of(d->schema->arch) == d->schema,
          "%s: its schema is not the registered one of its arch", d->name);
  }
  CHECK(strcmp(wan_dit_net()->schema->arch, "wan2.1-t2v") == 0 &&
            strcmp(umt5_net()->schema->arch, "umt5-xxl") == 0 &&
            strcmp(wan_vae_net()->schema->arch, "wan2.1-vae") == 0 &&
            strcmp(wan_vae22_net()->schema->arch, "wan2.2-vae") == 0,
        "the model files' archs");
}

/* d's schema has the attributes names, each field inside the config. */
static void check_fields(const net_desc *d, const char *const *names, int count) {
  const net_schema *sc = d->schema;
  for (int i = 0; i < count; i++)
    CHECK(net_attr_find(sc, names[i]) >= 0, "%s: no config attribute %s", d->name, names[i]);
  for (int i = 0; i < sc->nattrs; i++) {
    const net_attr *a = &sc->attrs[i];
    const size_t elem = a->field == NET_FIELD_INT ? sizeof(int) : 8;
    CHECK(a->count >= 0 && a->offset + elem * (size_t)(a->count > 0 ? a->count : 1) <=
                               sc->config_size,
          "%s: attribute %s at %zu outside the config's %zu bytes", d->name, a->name,
          a->offset, sc->config_size);
  }
}

/* config passes d's check; with attribute name zeroed it does not. */
static void check_config(const net_desc *d, const void *config, const char *name) {
  const net_schema *sc = d->schema;
  char err[256] = "", copy[1024];
  CHECK(sc->config_size <= sizeof copy, "%s: config of %zu bytes", d->name, sc->config_size);
  CHECK(sc->check(config, err, sizeof err) == 0, "%s: published refused: %s", d->name, err);
  const int k = net_attr_find(sc, name);
  if (k < 0) return; /* check_fields said so */
  memcpy(copy, config, sc->config_size);
  memset(copy + sc->attrs[k].offset, 0, 8);
  CHECK(sc->check(copy, err, sizeof err) != 0, "%s: %s = 0 accepted", d->name, name);
}

/* d's tensors of config: count, unique names, the parameter total. */
static void check_tensors(const net_desc *d, const void *config, const char *what, int count,
                          int64_t params) {
  const int n = d->schema->tensors(config, NULL);
  net_tensor *t = sp_test_malloc((size_t)n * sizeof *t);
  d->schema->tensors(config, t);
  int64_t p = 0;
  for (int i = 0; i < n; i++) {
    int64_t numel = 1;
    for (int k = 0; k < t[i].ndim; k++) numel *= t[i].shape[k];
    p += numel;
    for (int j = 0; j < i; j++)
      if (strcmp(t[i].group, t[j].group) == 0 && strcmp(t[i].name, t[j].name) == 0)
        CHECK(0, "%s: %s/%s twice", what, t[i].group, t[i].name);
  }
  if (count) CHECK(n == count, "%s: %d tensors, want %d", what, n, count);
  CHECK(p == params, "%s: %lld parameters, want %lld", what, (long long)p, (long long)params);
  free(t);
}

/* The config of preset name through d's schema. */
static void preset_of(const net_desc *d, const char *name, void *config) {
  CHECK(d->schema->preset(name, config) == 0, "%s: no preset %s", d->name, name);
}

static void check_dit(void) {
  const char *names[] = {"dim", "ffn_dim", "heads", "layers", "in_dim", "out_dim",
                         "patch", "text_len", "text_dim", "freq_dim", "eps"};
  check_fields(wan_dit_net(), names, 11);
  const char *presets[] = {"wan2.1-tiny", "wan2.1-1.3b", "wan2.1-14b"};
  const int64_t params[] = {5106496, 1418996800, 14288491584};
  const int layers[] = {4, 30, 40};
  for (int i = 0; i < 3; i++) {
    wan_file_config f;
    preset_of(wan_dit_net(), presets[i], &f);
    check_config(wan_dit_net(), &f, "dim");
    check_tensors(wan_dit_net(), &f, presets[i], 12 + 27 * layers[i] + 3, params[i]);
  }
}

static void check_umt5(void) {
  const char *names[] = {"vocab", "dim", "dim_attn", "ffn", "heads", "layers", "buckets",
                         "max_dist"};
  check_fields(umt5_net(), names, 8);
  umt5_config c;
  umt5_config_published(&c);
  check_config(umt5_net(), &c, "layers");
  const int64_t D = 4096, F = 10240;
  const int64_t layer = 2 * D + 4 * D * D + 3 * F * D + 32 * 64;
  check_tensors(umt5_net(), &c, "umt5-xxl", 242, 256384 * D + 24 * layer + D);
  plan_t5_shape s;
  plan_t5_layout lay;
  char err[200];
  umt5_gpu_shape(&c, 512, &s);
  CHECK(umt5_net()->layout(&s, &lay, err, sizeof err) == PLAN_OK &&
            lay.total == umt5_gpu_bytes(&c, 512),
        "umt5: the described layout is not the counted one");
}

static void check_vae(void) {
  const char *names[] = {"dim", "z_dim", "n_mult", "dim_mult", "num_res_blocks", "temporal_up"};
  check_fields(wan_vae_net(), names, 6);
  wan_vae_config c;
  wan_vae_config_published(&c);
  check_config(wan_vae_net(), &c, "dim");
  check_tensors(wan_vae_net(), &c, "wan2.1 vae", 108, 73295603);
}

static void check_vae22(void) {
  const char *names[] = {"dim", "dec_dim", "z_dim", "n_mult", "dim_mult", "num_res_blocks",
                         "temporal_down"};
  check_fields(wan_vae22_net(), names, 7);
  wan_vae22_config c;
  wan_vae22_config_published(&c);
  check_config(wan_vae22_net(), &c, "dim");
  check_tensors(wan_vae22_net(), &c, "wan2.2 vae", 110 + 86, 555051580 + 149637088);
}

int main(void) {
  sp_test_begin("test_nets");
  check_registry();
  check_dit();
  check_umt5();
  check_vae();
  check_vae22();
  return sp_test_end();
}
