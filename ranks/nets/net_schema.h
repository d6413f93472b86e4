/* A network's model file, described as data (MODEL.md "Model file"): its
 * arch, its config attributes (name, type, range, where each lives in the
 * network's config struct, required or defaulted), its config check, its
 * groups and its tensor table (group path, name, shape from the config,
 * whether the tensor may be stored quantised, the synthetic generator's
 * distribution), its presets and the root dtypes it takes. The model-file
 * layer (ranks/model/mfile.h) opens, validates, checksums, reads and
 * writes any network's file from this alone; nothing here touches a file.
 * A new network is a schema in a file of its own beside its description
 * (wan_schema.c, umt5_schema.c, wan_vae_schema.c), named by its
 * description (net_desc.schema, net.h), through which net_schema_of finds
 * it. */
#ifndef NET_SCHEMA_H
#define NET_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#define NET_MAX_NDIM 5

/* ---- config attributes --------------------------------------------------- */

typedef enum { NET_ATTR_I64 = 0, NET_ATTR_F64 = 1 } net_attr_type;        /* as stored */
typedef enum { NET_FIELD_I64 = 0, NET_FIELD_INT = 1, NET_FIELD_F64 = 2 } net_field_type; /* in C */

/* One root attribute of the config: int64 or float64 little-endian, a
 * scalar when it has one element, else 1-D. */
typedef struct net_attr {
  const char *name;
  net_attr_type type;
  net_field_type field;   /* the C type of its field */
  size_t offset;          /* of the field (an array's first element) in the config struct */
  int count;              /* elements: a fixed count ... */
  const char *count_attr; /* ... or, when set, this earlier attribute's value plus count_add
                           * (stored only when that is at least 1) */
  int count_add;
  int ranged;             /* each element must lie in lo..hi (checked when read) */
  int64_t lo, hi;
  int optional;           /* may be absent: the field is then dflt, and it is not written
                           * while it holds dflt */
  int64_t dflt;
  const char *when;       /* stored exactly when the optional attribute `when` is */
  const char *why;        /* the message when it is missing or out of range (after "PATH: "),
                           * NULL for the layer's */
} net_attr;

/* ---- groups and tensors ------------------------------------------------------ */

#define NET_PATH_MAX 48
#define NET_NAME_MAX 96

/* A group of the file, in the order the writer creates them. */
typedef struct net_group {
  char path[NET_PATH_MAX];  /* "/embed", "/experts/high/blocks/0003" */
  const char *count_attr;   /* its members are groups, as many as this config attribute says
                             * (messages name it), or NULL */
  int foreign;              /* its members are no table tensors (a tokenizer): whoever writes
                             * and reads it checks them */
} net_group;

/* One tensor of the table, in canonical order: the order of the model
 * checksum (MODEL.md "Model file"), of the writer and of every read. */
typedef struct net_tensor {
  char group[NET_PATH_MAX]; /* its group's path */
  char name[NET_NAME_MAX];  /* its dataset's name in the group */
  char key[NET_NAME_MAX + 16]; /* its official checkpoint key ("blocks.3.ffn.0.weight"): what a
                                * converter's key map yields */
  const char *synth_prefix; /* the synthetic generator hashes synth_prefix + key */
  int ndim;
  int64_t shape[NET_MAX_NDIM]; /* PyTorch's (a linear weight (out, in)) */
  int64_t numel;
  int quant;                /* a linear weight (out, in): a root dtype may store it quantised
                             * (MODEL.md "fp8 weights": the blocks' ten) */
  double synth_center, synth_half; /* synth: values center + half x U[-1, 1) */
} net_tensor;

/* ---- the schema ---------------------------------------------------------------- */

typedef struct net_schema {
  const char *arch;  /* root attribute arch */
  const char *what;  /* what the network is, for messages: "DiT", "VAE decoder" */
  size_t config_size;
  const net_attr *attrs; /* in the order they are written */
  int nattrs;
  /* Appended to the message of a missing or malformed attribute ("config
   * attribute X is missing or malformed (HINT)"), or NULL. */
  const char *attr_hint;
  /* The config read from a file or made by a preset is checked with it:
   * 0, or -1 with the reason in err. */
  int (*check)(const void *config, char *err, size_t n);
  /* Root dtypes it takes ("bf16", "fp32", "fp8": ranks/model/mfile_format.h),
   * NULL-terminated; and the dtype of its synth: models. */
  const char *const *root_dtypes;
  const char *synth_dtype;
  /* Groups (without the root) and tensors of a checked config, filled into
   * out when it is not NULL; each returns the count. */
  int (*groups)(const void *config, net_group *out);
  int (*tensors)(const void *config, net_tensor *out);
  /* Presets: name -> config (0, or -1 for an unknown name); the preset a
   * config equals, or NULL; the names for messages ("a, b, c"). */
  int (*preset)(const char *name, void *config);
  const char *(*preset_match)(const void *config);
  const char *(*preset_names)(void);
  /* The kind of preset in "unknown KINDpreset" ("" or a noun and a space). */
  const char *preset_kind;
} net_schema;

/* The schema of arch among the networks of this build (net_all: every
 * network a staticpipe file can hold), or NULL: what a file given to the
 * wrong command is named by. */
const net_schema *net_schema_of(const char *arch);

/* The index of the attribute named name, or -1. */
int net_attr_find(const net_schema *s, const char *name);
/* Element k of attribute a in config as an int64 (an F64 field truncated). */
int64_t net_attr_get(const net_attr *a, const void *config, int k);

/* ---- helpers for the schemas ------------------------------------------------------ */

/* Fills t's numel from its shape, and its key as group-less name when key
 * is "". */
void net_tensor_finish(net_tensor *t);
/* A fresh entry: t zeroed, then its group, name and shape (ndim sizes)
 * set and finished (net_tensor_finish); the caller adds the rest (quant,
 * the synth: distribution). */
void net_tensor_init(net_tensor *t, const char *group, const char *name, int ndim,
                     const int64_t *shape);

/* Whether configs a and b of s have the same architecture: every element
 * of every attribute that is not optional (an optional one, as the Wan 2.1
 * VAE's encoder, says what a file holds, not what the network is). */
int net_config_same(const net_schema *s, const void *a, const void *b);
/* A schema's presets, count of them, name(i) the name of the i-th: their
 * names for messages ("a, b, c"), joined into list (size bytes) the first
 * time and returned; and the first preset of s whose config (s->preset's,
 * made on zeroed memory) is the same as config (net_config_same), or NULL. */
const char *net_preset_names_join(const char *(*name)(int i), int count, char *list, size_t size);
const char *net_preset_find(const net_schema *s, const char *(*name)(int i), int count,
                            const void *config);
/* The i with name(i) equal to want, or -1 (a preset() looking up its
 * table). */
int net_preset_index(const char *(*name)(int i), int count, const char *want);

/* A network's preset_match and preset_names (the net_schema fields) over
 * its presets name(0) .. name(count - 1), for schema: net_preset_find and
 * net_preset_names_join, as two static functions of those names in the
 * schema's file. */
#define NET_PRESET_LOOKUPS(schema, name, count)                           \
  static const char *preset_match(const void *config) {                  \
    return net_preset_find(&(schema), name, count, config);              \
  }                                                                      \
  static const char *preset_names(void) {                                \
    static char list[128];                                               \
    return net_preset_names_join(name, count, list, sizeof list);       \
  }

#endif
