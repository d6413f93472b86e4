/* The SentencePiece unigram tokenizer of T5/UMT5, in C (TOKENIZER.md).
 *
 * A tokenizer is a tok_spec: plain arrays (pieces as one byte blob with
 * offsets, float32 scores, piece types, the precompiled normalisation map,
 * the special ids and four flags), which is what a model file stores.
 * tok_model_create checks a spec as hostile and builds what encoding needs
 * (two tries, the normalisation map's view). A spec comes from a
 * SentencePiece `spiece.model` (tok_spm_parse), a Hugging Face
 * `tokenizer.json` (tok_hfjson_parse), or a model file.
 *
 * The parsers and tok_model_create are pure (no I/O, no logging): they
 * write one message naming the field and the failed check into a caller
 * buffer, so the libFuzzer targets (tests/fuzz/) can drive them directly.
 * tok_model_load and tok_prompt_encode add the file name or the prompt and
 * log once. */
#ifndef RANK_TOKENIZER_H
#define RANK_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

/* SentencePiece's piece types (sentencepiece_model.proto), same numbers. */
typedef enum {
  TOK_NORMAL = 1,
  TOK_UNKNOWN = 2,
  TOK_CONTROL = 3,
  TOK_USER_DEFINED = 4,
  TOK_UNUSED = 5,
  TOK_BYTE = 6,
} tok_piece_type;

#define TOK_MAX_PIECES (1 << 22)              /* 16x UMT5's 256,384 pieces */
#define TOK_MAX_PIECE_BYTES 1024              /* one piece */
#define TOK_MAX_VOCAB_BYTES (64u << 20)       /* all pieces together */
#define TOK_MAX_CHARSMAP_BYTES (64u << 20)    /* the precompiled map (NFKC's is ~240 KB) */
#define TOK_MAX_FILE_BYTES (512u << 20)       /* spiece.model or tokenizer.json */
#define TOK_MAX_TEXT_BYTES (16u << 20)        /* one text to encode */
#define TOK_MAX_NORMALIZED_BYTES (64u << 20)  /* its normalised form */
#define TOK_CONTEXT 512                       /* Wan's text_len: tokens incl. EOS */

/* The serialisable tokenizer. Arrays are owned by whoever filled them
 * (tok_spec_free for a parser's output; a model's own copy is read-only). */
typedef struct tok_spec {
  int32_t n_pieces;
  uint8_t *piece_bytes;    /* (piece_offsets[n_pieces]) UTF-8 pieces back to back */
  uint32_t *piece_offsets; /* (n_pieces + 1) piece i is [off[i], off[i+1]) */
  float *scores;           /* (n_pieces) log probabilities */
  uint8_t *types;          /* (n_pieces) tok_piece_type */
  uint8_t *charsmap;       /* (charsmap_bytes) SentencePiece precompiled map, or NULL */
  uint32_t charsmap_bytes; /* 0: no normalisation map (identity) */
  int32_t unk_id;          /* the one TOK_UNKNOWN piece */
  int32_t eos_id;          /* appended to every prompt (a TOK_CONTROL piece) */
  int32_t pad_id;          /* -1 when the vocabulary has none */
  int32_t bos_id;          /* -1 when none; T5 uses none */
  uint8_t add_dummy_prefix;         /* "▁" before the text (Metaspace prepend) */
  uint8_t remove_extra_whitespaces; /* drop leading/trailing spaces, collapse runs */
  uint8_t escape_whitespaces;       /* spaces become "▁" (U+2581) */
  uint8_t byte_fallback;            /* unknown characters become <0xNN> pieces */
} tok_spec;

void tok_spec_free(tok_spec *s);

/* Parses a SentencePiece ModelProto (`spiece.model`) of n bytes: a hardened
 * protobuf wire-format reader (every varint and length bounds-checked,
 * unknown fields skipped, groups refused). Accepts only unigram models
 * without treat_whitespace_as_suffix. Returns 0 and fills out, or -1 with
 * a message in err (out left zeroed). */
int tok_spm_parse(const uint8_t *buf, size_t n, tok_spec *out, char *err, size_t errlen);

/* Parses a Hugging Face tokenizer.json of n bytes: a Unigram model, its
 * Precompiled normaliser, Metaspace pre-tokeniser and added tokens
 * (TOKENIZER.md "tokenizer.json"). Returns 0 or -1 as tok_spm_parse. */
int tok_hfjson_parse(const char *json, size_t n, tok_spec *out, char *err, size_t errlen);

typedef struct tok_model tok_model;

/* Checks spec (every array, id, type and the normalisation map's bounds;
 * no duplicate pieces, byte pieces as SentencePiece requires) and builds a
 * model holding its own copy. Returns 0 and *out (free with
 * tok_model_free), or -1 with a message in err. */
int tok_model_create(const tok_spec *spec, tok_model **out, char *err, size_t errlen);
void tok_model_free(tok_model *m);
/* The model's arrays, for writing it into a model file. */
const tok_spec *tok_model_spec(const tok_model *m);

/* Reads `spiece.model` or `tokenizer.json` (told apart by content: JSON
 * starts with '{'). SP_OK, or SP_ERR_INPUT / SP_ERR_RUNTIME logged once
 * with the path. */
int tok_model_load(const char *path, tok_model **out);

/* The tokenizers built into the binary, by name: TOK_BUILTIN_TINY, the
 * 320-piece SentencePiece model of ranks/text/tiny/spiece-tiny.model (the
 * umt5-tiny text encoder's; ranks/text/tiny/README.md). SP_OK and *out,
 * or SP_ERR_INPUT (logged) for an unknown name. */
#define TOK_BUILTIN_TINY "tiny"
int tok_model_builtin(const char *name, tok_model **out);

/* SentencePiece's EncodeAsIds on UTF-8 text: normalisation, whitespace
 * handling, Viterbi segmentation, unknown pieces merged or byte fallback;
 * no EOS. Invalid UTF-8 is refused with its byte offset. Returns 0 and a
 * malloc'd *ids of *n ids (NULL when n is 0), or -1 with a message. */
int tok_model_encode(const tok_model *m, const char *text, size_t len, int32_t **ids, size_t *n,
                     char *err, size_t errlen);

/* Wan's prompt cleaning (TOKENIZER.md "Prompt cleaning"): HTML unescaping
 * twice, whitespace runs collapsed to one space, ends stripped. Input must
 * be valid UTF-8 (checked). Returns 0 and a malloc'd NUL-terminated *out of
 * *out_len bytes, or -1 with a message. */
int tok_clean_wan(const char *in, size_t len, char **out, size_t *out_len, char *err, size_t errlen);

/* A prompt as Wan feeds its text encoder: cleaned, encoded, cut to
 * max_tokens - 1 tokens, EOS appended. ids has room for max_tokens
 * (2 <= max_tokens <= TOK_CONTEXT); *n is the count written, *dropped the
 * tokens cut (a warning says how many). An empty prompt is encoded as EOS
 * alone, with a warning. SP_OK, or SP_ERR_INPUT logged (invalid UTF-8 with
 * its byte offset, too long to process). */
int tok_prompt_encode(const tok_model *m, const char *prompt, size_t len, int max_tokens,
                      int32_t *ids, size_t *n, size_t *dropped);

#endif
