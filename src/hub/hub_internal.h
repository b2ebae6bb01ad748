/* hub_internal.h — what the Hub layer's files share: the logical checkpoint being read
 * (hub.c), the writer's plan (hub_write.c), and the table every convention implements
 * (hub_gptoss.c, hub_modelopt.c, hub_ct.c, hub_deepseek.c, hub_bnb.c).
 *
 * Reading: the shards are opened as plain safetensors files; their tensors are "raw" entries.
 * The detected convention's fold() pairs each quantized weight with its companions and adds
 * one pending tensor per pair: a name, a scheme (or an element type, for tensors it must
 * dequantize), a shape, and an item — the raw entries whose bytes make it and, when those
 * bytes are not already Burn's layout concatenated, a decode function. Raw entries nobody
 * folded become tensors of their own. hub.c then orders the tensors as the files do.
 *
 * Writing: a convention's plan() turns one qtk tensor into the stored tensors of the layout
 * (names, dtypes, shapes, and where each one's bytes come from) or says why it cannot;
 * config() writes the quantization config for the whole plan. */
#ifndef QTK_HUB_INTERNAL_H
#define QTK_HUB_INTERNAL_H

#include "io/ckpt_internal.h"
#include "io/util.h"
#include "hub/hub.h"

#include <jansson.h>

/* ---- reading ---- */

#define HUB_MAX_PARTS 6

typedef struct hub_raw {
    const qtk_ckpt_tensor *t; /* in its shard's description */
    uint32_t shard;
    size_t idx;               /* index in the shard's description */
    bool used;                /* folded into another tensor */
} hub_raw;

typedef struct qtk__hub qtk__hub;
typedef struct hub_item hub_item;

/* Makes the tensor's bytes (out holds its nbytes) from its parts' bytes (part[k] holds raw
 * entry it->raw[k]'s nbytes). name is the tensor's, for messages and notices. */
typedef qtk_status (*hub_decode_fn)(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part,
                                    uint8_t *out);

/* Dequantizes the tensor (its loaded bytes) with the convention's own formula; *done false
 * leaves it to qtk's dequantization (which then gives the same values). */
typedef qtk_status (*hub_deq_fn)(const qtk__hub *h, const hub_item *it, const qtk_ckpt_tensor *t, const uint8_t *bytes,
                                 qtk_dtype dtype, void *out, bool *done);

struct hub_item {
    size_t raw[HUB_MAX_PARTS]; /* indices into h->raw, in payload order */
    unsigned n;
    hub_decode_fn decode;      /* NULL: the parts' bytes concatenated are the tensor's bytes */
    const void *param;         /* the convention's own, in h->arena */
    hub_deq_fn deq;            /* optional: the reference dequantization */
};

typedef struct hub_pending {
    const char *name;
    bool quantized;
    qtk_scheme scheme;         /* quantized */
    qtk_elem elem;             /* raw (F32 for tensors dequantized on load) */
    int rank;
    const size_t *shape;
    hub_item item;
    bool has_param_id;
    uint64_t param_id;
    const size_t *value_shape; /* optional: the values' shape when it is not shape (in the arena) */
    int value_rank;
} hub_pending;

typedef struct hub_conv hub_conv;

struct qtk__hub {
    qtk_ckpt *self;            /* the logical checkpoint */
    qtk_hub_layout layout;
    const hub_conv *conv;
    qtk_ckpt **shard;
    char **shard_path;
    size_t n_shards;
    hub_raw *raw;
    size_t n_raw;
    hub_raw **by_name;         /* sorted by name */
    hub_pending *pend;
    size_t n_pend, cap_pend;
    hub_item *item;            /* parallel to self->desc.tensors */
    json_t *config;            /* config.json, or NULL */
    json_t *hfq;               /* hf_quant_config.json, or NULL */
    json_t *qfile;             /* quantize_config.json (GPTQ) or quant_config.json (AWQ) when
                                * config.json has no quantization_config, or NULL */
    const json_t *qcfg;        /* the quantization config in use (borrowed from the two), or NULL */
    const char *config_file, *quant_json, *index_file, *detected_by; /* arena */
    qtk_hub_notice *notices;
    size_t n_notices, cap_notices;
    /* The last released assembly buffer, kept for the next load: a conversion then touches
     * one buffer's pages once instead of a fresh allocation's per tensor. */
    void *spare;
    size_t spare_cap;
    qtk__arena arena;
};

/* Builds the logical checkpoint over open shards (owned from here on: closed on failure) with
 * the configs in dir (NULL: none) and an index's weight_map (NULL: none); a single file that
 * needs nothing of this comes back as it is (hub.c). */
qtk_status hub_build(qtk_ckpt **shards, char **paths, size_t n, const char *dir, const char *index_file,
                     const json_t *weight_map, qtk_hub_layout forced, const char *name, qtk_ckpt **out);
/* Reads config.json and hf_quant_config.json from dir, if present (hub_files.c). */
qtk_status hub_read_configs(qtk__hub *h, const char *dir);

/* The raw entry named name + suffix, or NULL. */
hub_raw *hub_find(const qtk__hub *h, const char *name, const char *suffix);
/* The shard file a raw entry is in, as its path was given (for messages). */
const char *hub_file(const qtk__hub *h, const hub_raw *r);
/* A raw entry's bytes in its shard's map (raw entries are stored in one piece). */
const uint8_t *hub_bytes(const qtk__hub *h, const hub_raw *r);
/* name without suffix (in the arena), or NULL if name does not end in it. */
char *hub_strip(qtk__hub *h, const char *name, const char *suffix);
/* Adds a tensor of the logical checkpoint (copied; shape must outlive the hub). */
qtk_status hub_add(qtk__hub *h, const hub_pending *p);
/* Adds a notice (tensor may be NULL). */
qtk_status hub_notice(qtk__hub *h, const char *tensor, const char *fmt, ...) QTK_PRINTF(3, 4);
/* Copies of shapes etc. */
void *hub_alloc(qtk__hub *h, size_t n);
bool hub_same_shape(const qtk_ckpt_tensor *t, const size_t *shape, int rank);

/* ---- shared by readers and writers ---- */

/* Parses a spec built with printf. */
qtk_status hub_scheme(qtk_scheme *s, const char *fmt, ...) QTK_PRINTF(2, 3);
/* The qtk scale dtype a stored scale element is (F32 -> f32, BF16 -> bf16, F16 -> f16,
 * F8_E8M0 and U8 -> ue8m0, F8_E4M3 -> ue4m3), NONE if it is none of these. */
qtk_dtype hub_scale_dtype(qtk_elem e);
/* The element a qtk scale dtype is stored as (ue8m0 -> F8_E8M0, ue4m3 -> F8_E4M3). */
qtk_elem hub_scale_elem(qtk_dtype d);
const char *hub_dtype_spec(qtk_dtype d); /* "f32", "bf16", ... */
/* Reads a stored scale of element e at p as f32. */
float hub_scale_value(qtk_elem e, const uint8_t *p);

/* The reference dequantization of a zero-point tensor: RN_S(s (q - z)) with S the scale's
 * own dtype (what GPTQ's, AWQ's and compressed-tensors' torch dequantizers compute: integers
 * times a tensor of the scales' dtype), then converted to dtype. qtk's own values are the
 * exact f32 product; the two agree for an f32 scale (nothing to do then). */
qtk_status hub_deq_zero_point(const qtk__hub *h, const hub_item *it, const qtk_ckpt_tensor *t, const uint8_t *bytes,
                              qtk_dtype dtype, void *out, bool *done);

/* JSON: member of an object (NULL if o is not an object or lacks it), an integer, a string. */
const json_t *hub_json(const json_t *o, const char *key);
bool hub_json_int(const json_t *v, long long *out);
const char *hub_json_str(const json_t *o, const char *key);

/* ---- writing ---- */

#define HUB_MAX_WPIECES 6

typedef struct hub_wpiece hub_wpiece;
typedef struct hub_wctx hub_wctx;
/* Writes a stored tensor's bytes (out holds p->nbytes) from the qtk tensor's bytes. */
typedef qtk_status (*hub_encode_fn)(hub_wctx *wc, const hub_wpiece *p, const qtk_ckpt_tensor *t, const uint8_t *bytes,
                                    uint8_t *out);

struct hub_wpiece {
    const char *name;          /* in the writer's arena */
    qtk_elem elem;
    int rank;
    size_t *shape;             /* in the writer's arena */
    size_t nbytes;
    /* where the bytes come from: a constant, an encoder, else the slice [src_off, +nbytes) of
     * the qtk tensor's bytes */
    size_t src_off;
    const uint8_t *constant;
    hub_encode_fn encode;
    const void *param;
    size_t phys;               /* index in its shard's description (the writer sets it) */
};

typedef struct hub_wtensor {
    hub_wpiece piece[HUB_MAX_WPIECES];
    unsigned n;
    int kind;                  /* the convention's classification, for its config */
    size_t shard;
} hub_wtensor;

struct hub_wctx {
    const qtk__desc *d;
    hub_wtensor *wt;           /* per tensor of d */
    qtk_hub_layout layout;
    const json_t *src_qcfg;    /* the source's quantization config if the source has this layout */
    const json_t *src_hfq;     /* the source's hf_quant_config.json if it has this layout */
    const json_t *src_config;  /* the source's config.json (any layout), or NULL */
    const qtk__hub *src;        /* the source checkpoint's hub (any layout), or NULL */
    qtk__arena *arena;
    qtk__hub_notice_fn notice;
    void *ctx;
};

/* A stored piece named t->name + suffix. */
hub_wpiece *hub_wpiece_add(hub_wctx *wc, hub_wtensor *w, const qtk_ckpt_tensor *t, const char *suffix, qtk_elem e,
                           const size_t *shape, int rank, size_t nbytes);
/* The module a weight belongs to: name without ".weight" (or the name itself). */
const char *hub_module(hub_wctx *wc, const char *name);

/* ---- the conventions ---- */

struct hub_conv {
    qtk_hub_layout layout;
    const char *name;
    const char *const *methods; /* config.json quant_method values that mean this layout */
    /* A raw tensor name that reveals the layout when no config names one (*why gets the
     * suffix), or false. */
    bool (*sniff)(const qtk__hub *h, const char **why);
    /* Folds quantized weights with their companions (hub_add), marks their raw entries
     * used, and refuses orphans, mismatched shapes, and configs the tensors contradict. */
    qtk_status (*fold)(qtk__hub *h);
    /* The stored tensors of one quantized tensor, or an error naming what does not fit. */
    qtk_status (*plan)(hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *w);
    /* qcfg: config.json's quantization_config to fill in (it holds the source's when the
     * source had this layout); *hfq: hf_quant_config.json to write, if the layout has one. */
    qtk_status (*config)(hub_wctx *wc, json_t *qcfg, json_t **hfq);
    /* Optional: true for a file-metadata key the convention consumed (not carried over). */
    bool (*meta_used)(const qtk__hub *h, const char *key);
};

extern const hub_conv hub_gptoss_conv, hub_modelopt_conv, hub_ct_conv, hub_deepseek_conv, hub_bnb_conv, hub_torchao_conv,
    hub_gptq_conv, hub_awq_conv;
const hub_conv *hub_conv_of(qtk_hub_layout l);
/* The hub behind a logical checkpoint, or NULL for a plain one. */
const qtk__hub *hub_of(const qtk_ckpt *c);

/* json_object_set_new that reports failure as QTK_E_NOMEM. */
qtk_status hub_jset(json_t *o, const char *key, json_t *v);

#endif
