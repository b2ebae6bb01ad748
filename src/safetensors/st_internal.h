/* st_internal.h — what the safetensors container (safetensors.c) and qtk's convention for
 * quantized tensors in it (st_convention.c) share. */
#ifndef QTK_ST_INTERNAL_H
#define QTK_ST_INTERNAL_H

#include "safetensors/safetensors.h"

#include <jansson.h>

#define QTK__META_CONVENTION "qtk:convention"
#define QTK__META_LAYOUT "qtk:layout" /* "none": the tensors as stored (qtk__desc.stored_as_is) */
#define QTK__META_SCHEME "qtk:scheme:"
#define QTK__META_SHAPE "qtk:shape:"
#define QTK__META_PARAM "qtk:param_id:"
#define QTK__META_SCALAR "qtk:scalar:"
#define QTK__CONVENTION_VERSION "1"

/* companion suffixes: scales, global, table */
/* the companions of a quantized tensor, in the order of its bytes: scales, offsets (affine
 * schemes), global, table */
#define QTK__ST_COMPANIONS 4
extern const char *const qtk__st_suffixes[QTK__ST_COMPANIONS];

/* One header entry, before it becomes a tensor of the description. */
typedef struct {
    const char *name;
    size_t name_len;
    qtk_elem elem;
    int rank;
    size_t *shape;
    size_t numel;
    size_t begin, end;
    size_t order;  /* position in the header */
    int consumed;  /* 1: a companion folded into a quantized tensor */
} st_entry;

/* Entries by name, for lookups that stay fast with 100 000 tensors. */
typedef struct {
    st_entry **by_name;
    size_t n;
} st_index;

/* The entry named name + suffix, or NULL. */
st_entry *qtk__st_find(const st_index *ix, const char *name, const char *suffix);
/* The dtype string an element is written as (NULL if safetensors has none). */
const char *qtk__st_name(qtk_elem e);

/* The safetensors tensors one quantized tensor becomes: values, scales, offsets, global,
 * table (all but the values may be absent: store=ggml has values only). */
typedef struct {
    const char *suffix; /* "" for the values */
    qtk_elem elem;
    int rank;
    size_t shape[QTK_MAX_RANK];
    size_t bytes;
    bool present;
} qpiece;
void qtk__st_quant_pieces(const qtk_scheme *s, const qtk_layout *L, qpiece p[1 + QTK__ST_COMPANIONS]);

/* metadata[prefix + name] as a string, or NULL */
const char *qtk__st_meta_get(const json_t *meta, const char *prefix, const char *name);
/* Reading: checks qtk's metadata keys, takes burnpack scalars and the file's own metadata
 * into c->desc; folds one quantized tensor (values entry v) with its companions; applies
 * parameter ids once the tensors exist. */
qtk_status qtk__st_read_metadata(qtk_ckpt *c, json_t *meta, const st_index *ix);
qtk_status qtk__st_add_quantized(qtk_ckpt *c, const st_index *ix, st_entry *v, const char *spec, const json_t *meta,
                                 size_t data_start);
qtk_status qtk__st_apply_param_ids(qtk_ckpt *c, json_t *meta);
/* Writing: the __metadata__ object for a description (the file's pairs, then qtk's keys). */
qtk_status qtk__st_build_meta(const qtk__desc *d, json_t *meta);

#endif
