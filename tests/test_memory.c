/* test_memory.c — a conversion's peak memory follows the largest tensor, not the model:
 * a 180 MiB f32 checkpoint (largest tensor 32 MiB) is converted to NVFP4 and back by the
 * qtk binary, and the child's maximum resident set size must stay under 96 MiB. Skipped
 * under sanitizers (their shadow memory and quarantine are not the program's) and without
 * $QTK_BIN. */
#define _DEFAULT_SOURCE /* wait4() */
#include "ckpt_util.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#  define QTK_UNDER_SANITIZER 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define QTK_UNDER_SANITIZER 1
#  endif
#endif

static const char *bin;

/* Runs the qtk binary with args (NULL-terminated) and returns its max RSS in KiB, -1 on
 * failure. */
static long run_rss(const char *const *args) {
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)(uintptr_t)bin;
    for (; *args && n < 15; args++) argv[n++] = (char *)(uintptr_t)*args;
    argv[n] = NULL;
    fflush(stdout); /* or the child flushes our buffered output a second time */
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        execv(bin, argv);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return ru.ru_maxrss;
}

static void peak_memory(void) {
    char model[512], q[512], back[512];
    snprintf(model, sizeof model, "%s", tmp_path("model.safetensors"));
    snprintf(q, sizeof q, "%s", tmp_path("model-nvfp4.bpk"));
    snprintf(back, sizeof back, "%s", tmp_path("back.safetensors"));
    const char *synth[] = {"synth", model, "--layers", "2", "--hidden", "1024", "--ffn", "4096", "--kv", "256",
                           "--vocab", "8192", "--dtype", "f32", NULL};
    CHECK(run_rss(synth) > 0);
    size_t n = 0;
    FILE *f = fopen(model, "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        n = (size_t)ftell(f);
        fclose(f);
    }
    CHECK(n > 180u << 20); /* 27 tensors, the largest (embedding, head) 8192 x 1024 f32 = 32 MiB */
    const char *conv[] = {"convert", model, q, "--scheme", "nvfp4", NULL};
    long rss = run_rss(conv);
    printf("  convert %.1f MiB f32 safetensors -> nvfp4 burnpack: max RSS %.1f MiB\n", (double)n / 1048576.0,
           (double)rss / 1024.0);
    CHECK(rss > 0 && rss < 96 * 1024);
    const char *deq[] = {"convert", q, back, "--scheme", "none", NULL};
    rss = run_rss(deq);
    printf("  convert nvfp4 burnpack -> f32 safetensors: max RSS %.1f MiB\n", (double)rss / 1024.0);
    CHECK(rss > 0 && rss < 96 * 1024);
}

/* The same model as a sharded DeepSeek-style block-FP8 checkpoint, converted to bf16 shards:
 * memory follows the largest tensor, not the number of shards or their size. */
static void peak_memory_sharded(void) {
    char model[512], ds[512], bf[512];
    snprintf(model, sizeof model, "%s", tmp_path("model.safetensors"));
    snprintf(ds, sizeof ds, "%s", tmp_path("ds"));
    snprintf(bf, sizeof bf, "%s", tmp_path("bf16"));
    const char *synth[] = {"synth", model, "--layers", "2", "--hidden", "1024", "--ffn", "4096", "--kv", "256",
                           "--vocab", "8192", "--dtype", "f32", NULL};
    if (!file_exists(model)) CHECK(run_rss(synth) > 0);
    const char *q[] = {"convert", model, ds, "--scheme", "e4m3,block=128x128:f32,store=native", "--skip", "embed|lm_head",
                       "--layout", "deepseek", "--max-shard-size", "40MB", NULL};
    CHECK(run_rss(q) > 0);
    const char *deq[] = {"convert", ds, bf, "--scheme", "none", "--dtype", "bf16", NULL};
    long rss = run_rss(deq);
    printf("  convert sharded block-FP8 (deepseek layout) -> bf16 shards: max RSS %.1f MiB\n", (double)rss / 1024.0);
    CHECK(rss > 0 && rss < 96 * 1024);
}

int main(int argc, char **argv) {
#ifdef QTK_UNDER_SANITIZER
    printf("memory: built with a sanitizer: skipped\n");
    return 77;
#endif
    bin = getenv("QTK_BIN");
    if (!bin) {
        printf("memory: QTK_BIN is not set: skipped\n");
        return 77;
    }
    tmp_dir_make();
    static const test_case cases[] = {T(peak_memory), T(peak_memory_sharded)};
    int rc = test_run("memory", cases, 2, argc, argv);
    tmp_dir_remove();
    return rc;
}
