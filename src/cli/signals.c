/* signals.c — what SIGINT, SIGTERM and SIGHUP do to a running command: every temporary
 * output goes at once (qtk_remove_temporaries is async-signal-safe); a command working
 * through a checkpoint gets a cancel flag and stops at the next tensor, the others die
 * with the signal. The exit status is the signal's either way. */
#include "cli.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t cancel, caught, graceful;
static const int watched[] = {SIGINT, SIGTERM, SIGHUP};

static void on_signal(int sig) {
    qtk_remove_temporaries();
    caught = sig;
    if (graceful && !cancel) {
        cancel = 1; /* the command stops at the next tensor; a second signal ends it now */
        return;
    }
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
