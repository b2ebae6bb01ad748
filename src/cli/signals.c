/* signals.c — what SIGINT, SIGTERM and SIGHUP do to a running command. A command working
 * through a checkpoint (convert, eval, demo) gets a cancel flag: the first signal sets it, and
 * the library stops at the next tensor or right before the output would be moved into place,
 * removing its temporary files as any failure does; a second signal ends the process at once.
 * Other commands end at once. Ending at once removes every temporary output first
 * (qtk_remove_temporaries is async-signal-safe; the library holds these signals while it
 * renames outputs into place, so a handler never sees half an output). The exit status is
 * the signal's either way. */
#include "cli.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t cancel, caught, graceful;
static const int watched[] = {SIGINT, SIGTERM, SIGHUP};

static void on_signal(int sig) {
    caught = sig;
    if (graceful && !cancel) {
        cancel = 1; /* the command stops at the next tensor; a second signal ends it now */
        return;
    }
    qtk_remove_temporaries();
    signal(sig, SIG_DFL);
    raise(sig);
}

void cli_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof watched / sizeof watched[0]; i++) sigaction(watched[i], &sa, NULL);
}

const volatile sig_atomic_t *cli_cancel_flag(void) {
    graceful = 1;
    return &cancel;
}

void cli_signals_finish(void) {
    if (!caught) return;
    int sig = caught;
    signal(sig, SIG_DFL);
    raise(sig);
}
