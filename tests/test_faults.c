/* test_faults.c — conversions that fail half way, as an unlucky user meets them: a target that
 * is a directory, a Hub output whose config file cannot be written, a directory of shards
 * replaced, a signal while the output is written, an input truncated while it is read, a full
 * disk and a read-only target. Each asserts the message, the exit status, that the old output
 * is untouched, and that no temporary file remains.
 *
 * The full-disk and read-only cases mount small tmpfs file systems: they run as the separate
 * test faults_rootfs (QTK_TEST_ROOTFS=1, filter "rootfs"), which exits 77 (skipped) when it
 * cannot mount (not root). */
#define _DEFAULT_SOURCE /* mkdtemp, usleep, kill beside _POSIX_C_SOURCE */
#include "ckpt_util.h"

#include "qtk_ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *bin;
static char out[8192], err[8192];

static int run(const char *fmt, ...) QTK_TEST_PRINTF(1, 2);
static int run(const char *fmt, ...) {
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return cli_run(bin, out, sizeof out, err, sizeof err, "%s", args);
}

static int sh(const char *fmt, ...) QTK_TEST_PRINTF(1, 2);
static int sh(const char *fmt, ...) {
    char c[4096], cmd[4400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c, sizeof c, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd '%s' && %s", tmp_path(""), c);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Number of temporary outputs (".qtk-tmp-", ".qtk-old-") anywhere under dir. */
static int temporaries_in(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (strstr(e->d_name, ".qtk-tmp-") || strstr(e->d_name, ".qtk-old-")) n++;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) n += temporaries_in(p);
    }
    closedir(d);
    return n;
}

static bool same_bytes(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    uint8_t *x = slurp(a, &na), *y = slurp(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

#define CHECK_NO_TEMPS(dir) CHECK_MSG(temporaries_in(dir) == 0, "temporary files left under %s", dir)

static void init(void);

static void setup(void) {
    static bool done;
    if (done) return;
    done = true;
    init();
    CHECK(run("synth s.safetensors --layers 1 --hidden 64 --ffn 128 --kv 32 --vocab 256") == 0);
    CHECK(run("synth s2.safetensors --layers 1 --hidden 64 --ffn 128 --kv 32 --vocab 256 --seed 7") == 0);
}

/* ---- a target that is a directory ---- */

static void target_is_directory(void) {
    setup();
    CHECK(sh("mkdir -p isdir.bpk && echo keep > isdir.bpk/keep.txt") == 0);
    for (int force = 0; force < 2; force++) {
        CHECK(run("convert s.safetensors isdir.bpk%s", force ? " --force" : "") == 1);
        CHECK_MSG(strstr(err, "'isdir.bpk' is a directory"), "message: %s", err);
        CHECK(file_exists(tmp_path("isdir.bpk/keep.txt")));
    }
    CHECK_NO_TEMPS(tmp_path(""));
    /* a Hub layout's config file that is a directory: the old output stays whole (issue 12
     * item 3: the tensor file used to replace the old one before config.json failed) */
    CHECK(sh("mkdir -p hubd && cp s.safetensors hubsrc.safetensors") == 0);
    CHECK(run("convert hubsrc.safetensors hubd/m.safetensors --scheme nvfp4 --layout modelopt") == 0);
    CHECK(sh("cp hubd/m.safetensors old-m.safetensors && cp hubd/hf_quant_config.json old-hfq.json && rm hubd/config.json && "
             "mkdir hubd/config.json") == 0);
    CHECK(run("convert s2.safetensors hubd/m.safetensors --scheme nvfp4 --layout modelopt --force") == 1);
    CHECK_MSG(strstr(err, "config.json' is a directory"), "message: %s", err);
    CHECK_MSG(same_bytes(tmp_path("hubd/m.safetensors"), tmp_path("old-m.safetensors")), "the old tensor file changed");
    CHECK_MSG(same_bytes(tmp_path("hubd/hf_quant_config.json"), tmp_path("old-hfq.json")), "the old hf_quant_config.json changed");
    CHECK_NO_TEMPS(tmp_path("hubd"));
    /* and without the obstacle, every file of the new output is in place */
    CHECK(sh("rmdir hubd/config.json") == 0);
    CHECK(run("convert s2.safetensors hubd/m.safetensors --scheme nvfp4 --layout modelopt --force") == 0);
    CHECK(!same_bytes(tmp_path("hubd/m.safetensors"), tmp_path("old-m.safetensors")));
    CHECK(file_exists(tmp_path("hubd/config.json")));
    CHECK(run("inspect hubd/m.safetensors") == 0 && strstr(out, "layout    modelopt"));
}

/* ---- a directory of shards replaced (issue 12 item 4) ---- */

static void shard_directory_replaced(void) {
    setup();
    CHECK(run("convert s.safetensors sd --max-shard-size 40KB") == 0);
    int old_shards = sh("ls sd | grep -c '^model-.*-of-.*safetensors$' | grep -qv '^[01]$'");
    CHECK_MSG(old_shards == 0, "the first output has fewer than 2 shards");
    CHECK(sh("echo '{\"tokenizer\": true}' > sd/tokenizer.json && mkdir sd/extra && echo x > sd/extra/file") == 0);
    CHECK(run("convert s2.safetensors sd --scheme 'q8s,block=32:f16' --force") == 0);
    /* exactly the new checkpoint, and the files that are not part of one */
    CHECK(sh("test \"$(ls sd | sort | tr '\\n' ' ')\" = 'extra model.safetensors tokenizer.json '") == 0);
    CHECK(file_exists(tmp_path("sd/extra/file")));
    CHECK(run("inspect sd") == 0 && strstr(out, "q8s,block=32:f16") && !strstr(out, "shards"));
    CHECK_NO_TEMPS(tmp_path(""));
    /* the other way: one file to shards, the old index gone with the old shards */
    CHECK(run("convert s.safetensors sd --max-shard-size 40KB --force") == 0);
    CHECK(sh("test ! -e sd/model.safetensors && test -e sd/model.safetensors.index.json && test -e sd/tokenizer.json") == 0);
    CHECK(run("inspect sd") == 0 && strstr(out, "BF16") && !strstr(out, "q8s"));
    CHECK_NO_TEMPS(tmp_path(""));
    /* without --force nothing is replaced */
    CHECK(run("convert s2.safetensors sd") == 1 && strstr(err, "replaced only with force"));
}

/* ---- a signal while the output is written (issue 12 item 7) ---- */

/* Starts BIN ARGS (split on spaces) in the temporary directory; stdout/stderr to files. */
static pid_t spawn(const char *args, const char *tag) {
    pid_t p = fork();
    if (p == 0) {
        if (chdir(tmp_path("")) != 0) _exit(127);
        char o[64], e[64];
        snprintf(o, sizeof o, "%s.out", tag);
        snprintf(e, sizeof e, "%s.err", tag);
        int fo = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fo, 1);
        dup2(fe, 2);
        char buf[2048], *argv[64];
        snprintf(buf, sizeof buf, "%s", args);
        int n = 0;
        argv[n++] = (char *)(uintptr_t)bin;
        for (char *t = strtok(buf, " "); t && n < 63; t = strtok(NULL, " ")) argv[n++] = t;
        argv[n] = NULL;
        execv(bin, argv);
        _exit(127);
    }
    return p;
}

/* Waits (up to 20 s) until a temporary output appears in the temporary directory. */
static bool wait_for_temporary(pid_t p) {
    for (int i = 0; i < 20000; i++) {
        if (temporaries_in(tmp_path("")) > 0) return true;
        int status;
        if (waitpid(p, &status, WNOHANG) == p) return false; /* it ended first */
        usleep(1000);
    }
    return false;
}

static int wait_status(pid_t p) {
    int status = 0;
    for (int i = 0; i < 60000; i++) {
        pid_t r = waitpid(p, &status, WNOHANG);
        if (r == p) return status;
        usleep(1000);
    }
    kill(p, SIGKILL);
    waitpid(p, &status, 0);
    return status;
}

static void read_tag(const char *tag, const char *ext, char *buf, size_t cap) {
    char name[64];
    snprintf(name, sizeof name, "%s.%s", tag, ext);
    size_t n = 0;
    uint8_t *b = slurp(tmp_path(name), &n);
    if (n >= cap) n = cap - 1;
    if (b) memcpy(buf, b, n);
    buf[b ? n : 0] = '\0';
    free(b);
}

static void big_input(void) {
    static bool done;
    if (done) return;
    done = true;
    /* 25 M BF16 parameters: long enough to be caught mid-way */
    CHECK(run("synth big.safetensors --layers 2 --hidden 1024 --ffn 2048 --kv 256 --vocab 4096") == 0);
}

static void signal_mid_write(void) {
    setup();
    big_input();
    static const struct {
        const char *args, *target;
        int sig, twice;
    } cases[] = {
        {"convert big.safetensors sig.bpk --scheme nvfp4 --threads 1 --force", "sig.bpk", SIGINT, 0},
        {"convert big.safetensors sig.bpk --scheme nvfp4 --threads 2 --force", "sig.bpk", SIGTERM, 0},
        {"convert big.safetensors sig.bpk --scheme nvfp4 --threads 1 --force", "sig.bpk", SIGTERM, 1},
        {"convert big.safetensors sigdir --scheme nvfp4 --max-shard-size 4MB --threads 1 --force", "sigdir", SIGINT, 0},
        {"convert big.safetensors sigdir --scheme nvfp4 --max-shard-size 4MB --layout modelopt --threads 1 --force",
         "sigdir", SIGHUP, 1},
        {"convert big.safetensors sigm/m.safetensors --scheme nvfp4 --layout modelopt --threads 1 --force",
         "sigm/m.safetensors", SIGINT, 0},
    };
    /* old outputs, to be left as they are */
    CHECK(run("convert s.safetensors sig.bpk") == 0);
    CHECK(run("convert s.safetensors sigdir --max-shard-size 40KB") == 0);
    CHECK(sh("mkdir -p sigm") == 0);
    CHECK(run("convert s.safetensors sigm/m.safetensors --scheme nvfp4 --layout modelopt") == 0);
    CHECK(sh("cp sig.bpk sig.old && tar cf sigdir.tar sigdir && tar cf sigm.tar sigm") == 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pid_t p = spawn(cases[i].args, "sig");
        bool caught = wait_for_temporary(p);
        CHECK_MSG(caught, "case %zu: no temporary output appeared before '%s' ended", i, cases[i].args);
        kill(p, cases[i].sig);
        if (cases[i].twice) {
            usleep(2000);
            kill(p, cases[i].sig); /* the second one ends it at once */
        }
        int status = wait_status(p);
        char e[4096];
        read_tag("sig", "err", e, sizeof e);
        CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == cases[i].sig, "case %zu: status 0x%x, want death by signal %d (%s)",
                  i, status, cases[i].sig, e);
        if (!cases[i].twice) CHECK_MSG(strstr(e, "cancelled"), "case %zu: message '%s'", i, e);
        CHECK_MSG(temporaries_in(tmp_path("")) == 0, "case %zu ('%s'): temporary files left", i, cases[i].args);
        CHECK_MSG(sh("cmp -s sig.bpk sig.old && mkdir -p chk && rm -rf chk/* && tar xf sigdir.tar -C chk && "
                     "diff -r chk/sigdir sigdir >/dev/null && tar xf sigm.tar -C chk && diff -r chk/sigm sigm >/dev/null") == 0,
                  "case %zu ('%s'): an old output changed", i, cases[i].args);
    }
}

/* A signal in the middle of a commit: rename() is interposed (the library is linked in
 * statically, so this definition is the one it calls) to raise SIGTERM right before one of
 * the renames that put an output in place; the handler does what the CLI's does on a second
 * signal, qtk_remove_temporaries() and exit. Whatever the timing, the output must be whole
 * (old or new) and nothing temporary may be left: the library holds the signal until its
 * renames are done. (Before, the shards committed inside the temporary directory were not
 * tracked, and a file's configs could be half replaced.) */
static volatile sig_atomic_t trap_armed;
static char trap_target[64];

int rename(const char *from, const char *to) {
    const char *base = strrchr(to, '/');
    base = base ? base + 1 : to;
    if (trap_armed && strstr(base, trap_target) && !strstr(base, ".qtk-")) {
        trap_armed = 0;
        raise(SIGTERM);
    }
    return renameat(AT_FDCWD, from, AT_FDCWD, to);
}

static void die_now(int sig) {
    (void)sig;
    qtk_remove_temporaries();
    _exit(99);
}

static int convert_with_trap(const char *in, const char *dst, const char *trap, const qtk_convert_options *o) {
    pid_t p = fork();
    if (p == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = die_now;
        sigaction(SIGTERM, &sa, NULL);
        snprintf(trap_target, sizeof trap_target, "%s", trap);
        trap_armed = 1;
        qtk_status st = qtk_ckpt_convert(in, dst, o, NULL);
        _exit(st ? 2 : trap_armed ? 3 : 0);
    }
    int status = 0;
    waitpid(p, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void signal_during_commit(void) {
    setup();
    char in[1200], in2[1200], dst[1200];
    snprintf(in, sizeof in, "%s", tmp_path("s.safetensors"));
    snprintf(in2, sizeof in2, "%s", tmp_path("s2.safetensors"));
    /* a directory of shards: the signal comes as the first shard is renamed inside the
     * temporary directory */
    CHECK(run("convert s.safetensors cd --max-shard-size 40KB") == 0);
    snprintf(dst, sizeof dst, "%s", tmp_path("cd"));
    qtk_convert_options o = {.scheme = "q8s,block=32:f16", .max_shard_bytes = 40000, .force = 1};
    int rc = convert_with_trap(in2, dst, "model-00001-of", &o);
    CHECK_MSG(rc == 99, "the conversion was not interrupted (exit %d)", rc);
    CHECK_NO_TEMPS(tmp_path(""));
    CHECK(run("inspect cd") == 0); /* whole: the old or the new checkpoint */
    /* a Hub file with its configs: the signal comes as hf_quant_config.json is renamed */
    CHECK(sh("mkdir -p cm") == 0);
    CHECK(run("convert s.safetensors cm/m.safetensors --scheme nvfp4 --layout modelopt") == 0);
    CHECK(sh("tar cf cm.tar cm") == 0);
    snprintf(dst, sizeof dst, "%s", tmp_path("cm/m.safetensors"));
    qtk_convert_options f = {.scheme = "e4m3,block=*:f32,store=native", .layout = QTK_LAYOUT_MODELOPT, .force = 1};
    rc = convert_with_trap(in2, dst, "hf_quant_config.json", &f);
    CHECK_MSG(rc == 99, "the conversion was not interrupted (exit %d)", rc);
    CHECK_NO_TEMPS(tmp_path(""));
    /* all three files old, or all three new */
    int same = sh("mkdir -p chk2 && rm -rf chk2/* && tar xf cm.tar -C chk2 && n=0; for f in m.safetensors "
                  "hf_quant_config.json config.json; do cmp -s cm/$f chk2/cm/$f && n=$((n+1)); done; "
                  "test $n = 0 || test $n = 3");
    CHECK_MSG(same == 0, "the Hub file and its configs are half replaced");
    CHECK(run("inspect cm/m.safetensors") == 0);
}

/* ---- an input truncated while it is read (issue 12 item 7) ---- */

typedef struct {
    const char *path;
    size_t keep;
    int after;
} trunc_ctx;

static int truncate_after(void *ctx, const qtk_progress *p) {
    trunc_ctx *t = ctx;
    if ((int)p->done == t->after && truncate(t->path, (off_t)t->keep) != 0) perror("truncate");
    return 0;
}

static void truncated_input_library(void) {
    setup();
    big_input();
    /* the library: a progress callback truncates the input after the first tensor */
    CHECK(sh("cp big.safetensors t1.safetensors") == 0);
    const char *in = tmp_path("t1.safetensors");
    char inp[1024];
    snprintf(inp, sizeof inp, "%s", in);
    trunc_ctx tc = {inp, 4u << 20, 1};
    qtk_convert_options o = {.scheme = "nvfp4", .progress = truncate_after, .ctx = &tc, .threads = 1};
    CHECK_ERR(qtk_ckpt_convert(inp, tmp_path("t1.bpk"), &o, NULL), QTK_E_IO, "was truncated while it was being read");
    CHECK(strstr(qtk_last_error(), "t1.safetensors"));
    CHECK(!file_exists(tmp_path("t1.bpk")));
    CHECK_NO_TEMPS(tmp_path(""));
    /* the same with a copy (no quantization: bytes written straight from the map) */
    CHECK(sh("cp big.safetensors t1.safetensors") == 0);
    qtk_convert_options k = {.progress = truncate_after, .ctx = &tc, .threads = 1};
    CHECK_ERR(qtk_ckpt_convert(inp, tmp_path("t1.bpk"), &k, NULL), QTK_E_IO, "was truncated while it was being read");
    CHECK(!file_exists(tmp_path("t1.bpk")));
    CHECK_NO_TEMPS(tmp_path(""));
    /* and eval */
    CHECK(sh("cp big.safetensors t1.safetensors") == 0);
    const char *schemes[1] = {"q8s,block=32:f16"};
    qtk_eval_options e = {.schemes = schemes, .n_schemes = 1, .progress = truncate_after, .ctx = &tc, .threads = 1};
    qtk_eval_report *r = NULL;
    CHECK_ERR(qtk_ckpt_eval(inp, &e, &r), QTK_E_IO, "was truncated while it was being read");
    CHECK(r == NULL);
    /* reads of an open checkpoint whose file shrank: an error, never SIGBUS */
    CHECK(sh("cp big.safetensors t1.safetensors") == 0);
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(inp, NULL, &c));
    CHECK_OK(qtk_ckpt_status(c));
    size_t last = qtk_ckpt_count(c) - 1;
    const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, last);
    CHECK(truncate(inp, 1 << 20) == 0);
    float *v = malloc(t->numel * sizeof(float));
    CHECK_ERR(qtk_ckpt_read_values(c, last, QTK_DTYPE_F32, v, t->numel), QTK_E_IO, "was truncated while it was being read");
    CHECK_ERR(qtk_ckpt_status(c), QTK_E_IO, "t1.safetensors");
    qtk_ckpt_view view;
    CHECK_OK(qtk_ckpt_load(c, last, &view)); /* a view into the map: zeros where the file went */
    volatile uint8_t sum = 0;
    for (size_t i = 0; i < view.len; i += 4096) sum ^= view.data[i];
    (void)sum;
    qtk_ckpt_unload(c, &view);
    free(v);
    qtk_ckpt_close(c);
}

static void truncated_input_cli(void) {
    setup();
    big_input();
    CHECK(run("convert s.safetensors tr.bpk") == 0);
    CHECK(sh("cp tr.bpk tr.old") == 0);
    const char *conv[] = {"convert t2.safetensors tr.bpk --scheme nvfp4 --threads 1 --force",
                          "convert t2.safetensors tr.bpk --threads 1 --force"};
    for (int i = 0; i < 2; i++) {
        CHECK(sh("cp big.safetensors t2.safetensors") == 0);
        pid_t p = spawn(conv[i], "tr");
        CHECK_MSG(wait_for_temporary(p), "'%s' ended before it could be stopped", conv[i]);
        kill(p, SIGSTOP);
        CHECK(sh("truncate -s 2M t2.safetensors") == 0);
        kill(p, SIGCONT);
        int status = wait_status(p);
        char e[4096];
        read_tag("tr", "err", e, sizeof e);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 1, "'%s': status 0x%x (%s)", conv[i], status, e);
        CHECK_MSG(strstr(e, "'t2.safetensors' was truncated while it was being read"), "message: %s", e);
        CHECK(same_bytes(tmp_path("tr.bpk"), tmp_path("tr.old")));
        CHECK_NO_TEMPS(tmp_path(""));
    }
    /* eval too */
    CHECK(sh("cp big.safetensors t2.safetensors") == 0);
    pid_t p = spawn("eval t2.safetensors --scheme nvfp4 --scheme mxfp8 --scheme mxfp4 --scheme nf4 --scheme e4m3 "
                    "--scheme q4f,block=32:f16 --scheme q8s,block=32:f16 --scheme q2s,block=32:f16 --threads 1",
                    "ev");
    usleep(150000); /* well into the tensors (8 schemes over 25 M elements take seconds) */
    kill(p, SIGSTOP);
    CHECK(sh("truncate -s 2M t2.safetensors") == 0);
    kill(p, SIGCONT);
    int status = wait_status(p);
    char e[4096];
    read_tag("ev", "err", e, sizeof e);
    /* eval may have been past the header already, or still opening it: an error either way */
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 1, "eval: status 0x%x (%s)", status, e);
    CHECK_MSG(strstr(e, "t2.safetensors"), "eval message: %s", e);
}

/* ---- a read-only target (the non-root variant; rootfs_read_only mounts one) ---- */

static void read_only_directory(void) {
    setup();
    if (geteuid() == 0) return; /* root writes anywhere: rootfs_read_only covers it */
    CHECK(sh("mkdir -p ro && cp s.safetensors ro/old.bpk && chmod 555 ro") == 0);
    CHECK(run("convert s.safetensors ro/old.bpk --force") == 1);
    CHECK_MSG(strstr(err, "Permission denied"), "message: %s", err);
    CHECK(same_bytes(tmp_path("ro/old.bpk"), tmp_path("s.safetensors")));
    CHECK(sh("chmod 755 ro") == 0);
    CHECK_NO_TEMPS(tmp_path("ro"));
}

/* ---- full disk and read-only mounts (root) ---- */

static bool rootfs_wanted(void) { return getenv("QTK_TEST_ROOTFS") != NULL; }

static bool mount_tmpfs(const char *dir, const char *opts) {
    if (sh("mkdir -p %s && mount -t tmpfs -o %s qtk-test %s 2>/dev/null", dir, opts, dir) == 0) return true;
    printf("  cannot mount a tmpfs (not root?): skipped\n");
    tmp_dir_remove();
    exit(77);
}

static void rootfs_full_disk(void) {
    if (!rootfs_wanted()) return;
    setup();
    if (geteuid() != 0) {
        printf("  not root: the full-disk test is skipped\n");
        tmp_dir_remove();
        exit(77);
    }
    mount_tmpfs("full", "size=96k"); /* the nvfp4 file (44 KB) fits; the BF16 copy (141 KB), mxfp8 (76 KB more) do not */
    CHECK(run("convert s.safetensors full/small.bpk --scheme nvfp4") == 0); /* fits */
    CHECK(sh("cp full/small.bpk small.old") == 0);
    static const char *cases[] = {
        "convert s.safetensors full/small.bpk --force",
        "convert s.safetensors full/one.safetensors",
        "convert s.safetensors full/dir --max-shard-size 100KB",
        "convert s.safetensors full/small.bpk --scheme mxfp8 --force",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_MSG(run("%s", cases[i]) == 1, "'%s' did not fail", cases[i]);
        CHECK_MSG(strstr(err, "No space left on device"), "'%s': message %s", cases[i], err);
        CHECK(same_bytes(tmp_path("full/small.bpk"), tmp_path("small.old")));
        CHECK(!file_exists(tmp_path("full/one.safetensors")) && !file_exists(tmp_path("full/dir")));
        CHECK_NO_TEMPS(tmp_path("full"));
    }
    /* a Hub output whose tensor file fits and whose configs do not (issue 12 item 3: the
     * old files used to be gone by then) */
    CHECK(sh("umount full") == 0);
    mount_tmpfs("full", "size=4m");
    CHECK(run("convert s.safetensors full/m.safetensors --scheme nvfp4 --layout modelopt") == 0);
    CHECK(sh("cp full/m.safetensors m.old && cp full/hf_quant_config.json hfq.old && cp full/config.json cfg.old") == 0);
    /* room for the old files and exactly one more tensor file: the new configs do not fit */
    CHECK(sh("used=$(du -k full | tail -1 | cut -f1); t=$(du -k full/m.safetensors | cut -f1); "
             "mount -o remount,size=$(( (used + t) * 1024 )) full") == 0);
    CHECK(run("convert s2.safetensors full/m.safetensors --scheme nvfp4 --layout modelopt --force") == 1);
    CHECK_MSG(strstr(err, "No space left on device"), "message %s", err);
    CHECK(same_bytes(tmp_path("full/m.safetensors"), tmp_path("m.old")));
    CHECK(same_bytes(tmp_path("full/hf_quant_config.json"), tmp_path("hfq.old")));
    CHECK(same_bytes(tmp_path("full/config.json"), tmp_path("cfg.old")));
    CHECK_NO_TEMPS(tmp_path("full"));
    CHECK(sh("umount full") == 0);
}

static void rootfs_read_only(void) {
    if (!rootfs_wanted()) return;
    setup();
    if (geteuid() != 0) {
        tmp_dir_remove();
        exit(77);
    }
    mount_tmpfs("rofs", "size=8m");
    CHECK(run("convert s.safetensors rofs/old.bpk") == 0);
    CHECK(run("convert s.safetensors rofs/olddir --max-shard-size 40KB") == 0);
    CHECK(sh("cp rofs/old.bpk ro.old && mount -o remount,ro rofs") == 0);
    static const char *cases[] = {
        "convert s2.safetensors rofs/old.bpk --force",
        "convert s2.safetensors rofs/new.gguf",
        "convert s2.safetensors rofs/olddir --force",
        "convert s2.safetensors rofs/h.safetensors --scheme nvfp4 --layout modelopt",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_MSG(run("%s", cases[i]) == 1, "'%s' did not fail", cases[i]);
        CHECK_MSG(strstr(err, "Read-only file system"), "'%s': message %s", cases[i], err);
        CHECK(same_bytes(tmp_path("rofs/old.bpk"), tmp_path("ro.old")));
        CHECK(run("inspect rofs/olddir") == 0 && strstr(out, "BF16"));
        CHECK_NO_TEMPS(tmp_path("rofs"));
    }
    CHECK(sh("umount rofs") == 0);
}

static void cleanup(void) {
    if (rootfs_wanted()) sh("umount full rofs 2>/dev/null; true");
    tmp_dir_remove();
}

static void init(void) {
    bin = getenv("QTK_BIN");
    if (!bin) {
        fprintf(stderr, "QTK_BIN is not set\n");
        exit(1);
    }
    tmp_dir_make();
    atexit(cleanup);
}

TEST_MAIN("faults", T(target_is_directory), T(shard_directory_replaced), T(signal_mid_write), T(signal_during_commit),
          T(truncated_input_library), T(truncated_input_cli), T(read_only_directory), T(rootfs_full_disk),
          T(rootfs_read_only))
