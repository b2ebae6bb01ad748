/* ckpt_internal.h — what a checkpoint format implements, and the reader/writer state the
 * formats share. A new format is a room defining a qtk__ckpt_ops and one line in the table
 * of ckpt/formats.c. */
#ifndef QTK_CKPT_INTERNAL_H
#define QTK_CKPT_INTERNAL_H

#include "io/checkpoint.h"
#include "io/fileio.h"
#include "io/mapfile.h"
#include "io/util.h"

#include <stdatomic.h>

#include "common/internal.h"

/* Where a tensor's bytes are: one or more ranges of the file, concatenated in order (a
 * quantized tensor of the safetensors convention is values + scales + global + table). */
#define QTK__MAX_PIECES 4
typedef struct qtk__ckpt_piece {
    size_t off, len; /* absolute file offset */
} qtk__ckpt_piece;
typedef struct qtk__ckpt_loc {
    qtk__ckpt_piece piece[QTK__MAX_PIECES];
    unsigned n;
} qtk__ckpt_loc;

/* A logical checkpoint built over other open checkpoints (hub.c: Hugging Face layouts and
 * sharded checkpoints) hands its tensors out itself: when virt is set, map and loc are
 * unused and these replace them. */
typedef struct qtk__ckpt_virt {
    /* On failure load leaves nothing to release (v->owned NULL). */
    qtk_status (*load)(qtk_ckpt *c, size_t i, qtk_ckpt_view *v);
    /* Gives v->owned back (optional: NULL means free()). */
    void (*release)(qtk_ckpt *c, qtk_ckpt_view *v);
    void (*drop_pages)(qtk_ckpt *c, size_t i);
    size_t (*offset_of)(const qtk_ckpt *c, size_t i);
    void (*close)(void *impl);
    /* QTK_OK while the files under it are intact (qtk_ckpt_status) */
    qtk_status (*status)(const qtk_ckpt *c);
} qtk__ckpt_virt;

typedef struct qtk__named {
    const char *name;
    size_t index;
} qtk__named;

struct qtk_ckpt {
    qtk_ckpt_format fmt;
    const struct qtk__ckpt_ops *ops; /* the format's reader (NULL for a logical checkpoint) */
    /* Owners: the caller (until qtk_ckpt_close) and each tensor that borrows the map
     * (qtk_ckpt_load_tensor); the last one frees. */
    _Atomic size_t refs;
    char *name;           /* path, for messages */
    qtk__mapfile map;
    qtk__desc desc;
    qtk__ckpt_loc *loc;   /* parallel to desc.tensors */
    size_t cap_loc;
    qtk_ckpt_facts facts;
    void *priv;           /* the format's own reader state (ops->close frees it) */
    const qtk__ckpt_virt *virt; /* a logical checkpoint's own loader (hub.c), else NULL */
    void *impl;           /* its state (virt->close frees it) */
    qtk__named *by_name;  /* tensors sorted by name (qtk_ckpt_find), built when first needed */
    /* the file tables its lookup tensors name, one reference each (luts.c) */
    char (*tables)[QTK_TABLE_NAME_MAX];
    size_t n_tables, cap_tables;
};

struct qtk__ckpt_writer {
    qtk__afile file;
    const struct qtk__ckpt_ops *ops;
    const qtk__desc *desc;
    size_t next;          /* tensors written so far */
    size_t pos;           /* bytes written into the data section */
    size_t *offsets;      /* per tensor: start relative to the data section (set by begin) */
    size_t data_end;      /* relative end of the last tensor */
    void *priv;           /* the format's own writer state (ops->wfree frees it) */
    size_t data_start;    /* absolute start of the data section (set after begin) */
    uint8_t *put_done;    /* qtk__ckpt_writer_put_at: which tensors are written (else NULL) */
};

typedef struct qtk__ckpt_ops {
    qtk_ckpt_format fmt;
    const char *name;
    const char *signature; /* what sniff looks for, for messages: "burnpack magic (\"NRUB\")" */
    const char *ext;       /* the file extension: ".bpk" */
    /* true if the bytes look like this format (a magic number, a header shape) */
    bool (*sniff)(const uint8_t *data, size_t len);
    /* Validates c->map and fills c->desc, c->loc (one per tensor, in file order), c->facts. */
    qtk_status (*parse)(qtk_ckpt *c);
    /* Validates w->desc for the format, sets w->offsets/data_end, and writes everything
     * before the tensor data. */
    qtk_status (*begin)(qtk__ckpt_writer *w);
    /* Optional: writes tensor w->next (NULL: zero-fill up to its offset, then the bytes as
     * they are — right for formats that store Burn's layout). */
    qtk_status (*put)(qtk__ckpt_writer *w, const uint8_t *bytes, size_t len);
    /* Optional: produces tensor i's bytes (a format whose tensors are not stored in the
     * description's layout and must be translated on load, GGUF); sets v->data and, for a
     * buffer it allocated, v->owned (freed by qtk_ckpt_unload). NULL: the bytes are the
     * file's pieces (c->loc). */
    qtk_status (*load)(qtk_ckpt *c, size_t i, qtk_ckpt_view *v);
    /* Optional: false if the format cannot store tensor t as it is (why says what stands in
     * the way); NULL: every tensor the description can hold. */
    bool (*can_hold)(const qtk_ckpt_tensor *t, char *why, size_t cap);
    /* Optional: frees c->priv / w->priv. */
    void (*close)(qtk_ckpt *c);
    void (*wfree)(qtk__ckpt_writer *w);
} qtk__ckpt_ops;

/* Opens path with the first of the n formats whose sniff accepts it (falling back to the
 * extension, for the message); c is new. */
qtk_status qtk__ckpt_open_path(const char *path, const qtk__ckpt_ops *const *formats, size_t n, qtk_ckpt **out);
/* The same over caller memory. */
qtk_status qtk__ckpt_open_buffer(const void *data, size_t len, const char *name, const qtk__ckpt_ops *const *formats,
                                 size_t n, qtk_ckpt **out);
/* A fresh, empty checkpoint object named name (for logical checkpoints). */
qtk_status qtk__ckpt_new(const char *name, qtk_ckpt **out);
/* qtk_ckpt_load without checking a quantized tensor's bytes (for callers that check them
 * on the way, such as qtk_tensor_wrap). */
qtk_status qtk__ckpt_load_unchecked(qtk_ckpt *c, size_t i, qtk_ckpt_view *v);
/* Takes one more owner of c (see refs), and gives one back. */
void qtk__ckpt_retain(qtk_ckpt *c);
void qtk__ckpt_release(qtk_ckpt *c);
/* Writes tensor j of the writer's description at its place, in any order (formats without
 * a put hook); commit still checks that every tensor was written once. */
qtk_status qtk__ckpt_writer_put_at(qtk__ckpt_writer *w, size_t j, const void *bytes, size_t len);

/* Appends a location for the tensor just added to c->desc. */
qtk_status qtk__ckpt_add_loc(qtk_ckpt *c, const qtk__ckpt_loc *loc);

/* Lookup-mode tensors carry their table's entries after the scales (SPEC §5), but neither
 * Burn's scheme nor a file has to name a table qtk knows. This names the table the entries
 * are: `hint` if that table has exactly these entries, else a built-in one that does, else
 * `hint` registered with them if no table has that name yet, else a table registered under
 * a name derived from the entries ("lut-" + 16 hex digits). Tables registered so are c's:
 * counted file tables, released with c (qtk__ckpt_release_tables, when c is freed). */
/* Room for n tensor locations (see qtk__desc_reserve). */
qtk_status qtk__ckpt_reserve_loc(qtk_ckpt *c, size_t n);
qtk_status qtk__ckpt_resolve_table(qtk_ckpt *c, qtk_scheme *s, const uint8_t *entries, size_t n, const char *hint);
void qtk__ckpt_release_tables(qtk_ckpt *c);



#define QTK__ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))

#endif
