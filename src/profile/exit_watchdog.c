/* exit_watchdog.c - makes sure a SIGTERM reaches the Python handler of a child of
 * `fastprof run --subprocesses`, or ends the process.
 *
 * A child catches SIGTERM in Python (children.py writes its profile, then dies of the signal).
 * CPython runs a Python handler when the main thread next runs Python code or gets EINTR from a
 * blocking call.  A SIGTERM that lands after the thread released the GIL but before it entered
 * the blocking call (sem_wait in a multiprocessing lock, read on a pipe) interrupts nothing: the
 * thread then blocks, the handler never runs, and a process that SIGTERM's default action would
 * have ended lives on (a pool's terminate() then waits for it forever).
 *
 * The watchdog wraps the interpreter's C handler for SIGTERM: it calls it (so the Python handler
 * is due), then, when SIGALRM has its default action and no timer is pending, nudges the main
 * thread every FP_WD_PERIOD_US with a SIGALRM whose handler does nothing: the blocking call
 * returns EINTR and CPython runs the pending Python handler, which cancels the nudges as its
 * first step.  After FP_WD_NUDGES nudges without that, the process ends by SIGTERM's default
 * action, as it would have without fastprof.
 *
 * Only async-signal-safe calls are made in the signal handlers. */
#include "../common.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define FP_WD_PERIOD_US 100000 /* between nudges */
#define FP_WD_NUDGES 100       /* 10 seconds of them */

/* The handler the interpreter had for SIGTERM when the watchdog was installed. */
static struct sigaction fp_wd_prev;
/* 1 while the nudges run (SIGALRM is the watchdog's). */
static volatile sig_atomic_t fp_wd_armed;
/* Nudges sent since the SIGTERM. */
static volatile sig_atomic_t fp_wd_nudges;
/* The process the nudges were started in (a fork child inherits the flag, not the timer). */
static volatile pid_t fp_wd_pid;

/* Sets SIGALRM's action to handler (SIG_DFL, or the nudge).  Returns 0, or -1 (errno set). */
static int
fp_wd_set_alarm_action(void (*handler)(int))
{
    struct sigaction act;
    memset(&act, 0, sizeof(act));
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    act.sa_flags = 0; /* no SA_RESTART: the nudge must interrupt the blocking call */
    return sigaction(SIGALRM, &act, NULL);
}

/* Arms the real-time timer for usec microseconds (0 disarms).  Returns nothing. */
static void
fp_wd_timer(long usec)
{
    struct itimerval t;
    memset(&t, 0, sizeof(t));
    t.it_value.tv_sec = usec / 1000000;
    t.it_value.tv_usec = usec % 1000000;
    setitimer(ITIMER_REAL, &t, NULL);
}

/* Returns 1 when the program may have the real-time timer and SIGALRM (a handler of its own, or
 * a timer pending), else 0. */
static int
fp_wd_alarm_taken(void)
{
    struct sigaction alrm;
    struct itimerval t;
    if (sigaction(SIGALRM, NULL, &alrm) != 0 || (alrm.sa_flags & SA_SIGINFO) ||
        alrm.sa_handler != SIG_DFL)
        return 1;
    if (getitimer(ITIMER_REAL, &t) != 0)
        return 1;
    return t.it_value.tv_sec != 0 || t.it_value.tv_usec != 0;
}

/* Calls the interpreter's SIGTERM handler (the Python handler is then due).  Returns nothing. */
static void
fp_wd_trip(int sig, siginfo_t *info, void *ctx)
{
    if (fp_wd_prev.sa_flags & SA_SIGINFO) {
        if (fp_wd_prev.sa_sigaction != NULL)
            fp_wd_prev.sa_sigaction(sig, info, ctx);
    } else if (fp_wd_prev.sa_handler != SIG_DFL && fp_wd_prev.sa_handler != SIG_IGN) {
        fp_wd_prev.sa_handler(sig);
    }
}

/* SIGALRM while armed: the blocking call it interrupted returns EINTR, so the pending Python
 * handler runs.  Re-arms, or after FP_WD_NUDGES ends the process by SIGTERM's default action.
 * Returns nothing. */
static void
fp_wd_nudge(FP_UNUSED int sig)
{
    int saved = errno;
    if (fp_wd_armed) {
        fp_wd_nudges = fp_wd_nudges + 1;
        if (fp_wd_nudges < FP_WD_NUDGES) {
            fp_wd_timer(FP_WD_PERIOD_US);
        } else {
            struct sigaction dfl;
            memset(&dfl, 0, sizeof(dfl));
            dfl.sa_handler = SIG_DFL;
            sigemptyset(&dfl.sa_mask);
            sigaction(SIGTERM, &dfl, NULL);
            kill(getpid(), SIGTERM);
        }
    }
    errno = saved;
}

/* Starts the nudges, the first after usec, when SIGALRM and the timer are free.  Returns 1 when
 * it started them, else 0. */
static int
fp_wd_start(long usec)
{
    if (fp_wd_armed || fp_wd_alarm_taken() || fp_wd_set_alarm_action(fp_wd_nudge) != 0)
        return 0;
    fp_wd_nudges = 0;
    fp_wd_pid = getpid();
    fp_wd_armed = 1;
    fp_wd_timer(usec);
    return 1;
}

/* The SIGTERM handler: the interpreter's, then the nudges.  Returns nothing. */
static void
fp_wd_handler(int sig, siginfo_t *info, void *ctx)
{
    int saved = errno;
    fp_wd_trip(sig, info, ctx);
    fp_wd_start(FP_WD_PERIOD_US);
    errno = saved;
}

/* _sigterm_watchdog(): wraps the current SIGTERM handler (the interpreter's, set by
 * signal.signal with a Python function) as described above.  Returns None, or NULL with
 * OSError set when sigaction fails. */
static PyObject *
fp_wd_install(FP_UNUSED PyObject *m, FP_UNUSED PyObject *unused)
{
    struct sigaction cur, act;
    if (sigaction(SIGTERM, NULL, &cur) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == fp_wd_handler)
        Py_RETURN_NONE; /* already installed (inherited by a fork child) */
    fp_wd_prev = cur;
    memset(&act, 0, sizeof(act));
    act.sa_sigaction = fp_wd_handler;
    act.sa_mask = cur.sa_mask;
    act.sa_flags = (cur.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
    if (sigaction(SIGTERM, &act, NULL) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

/* _sigterm_watchdog_cancel(): stops the nudges (SIGALRM back to its default action, the timer
 * disarmed).  Returns True when nudges were running for a SIGTERM this process got (in a fork
 * child: one that came after the fork, before Python's after-fork step; the flag a parent's
 * SIGTERM left is cleared, with False), else False; NULL with OSError set when sigaction
 * fails. */
static PyObject *
fp_wd_cancel(FP_UNUSED PyObject *m, FP_UNUSED PyObject *unused)
{
    if (!fp_wd_armed)
        Py_RETURN_FALSE;
    int mine = fp_wd_pid == getpid();
    fp_wd_timer(0);
    fp_wd_armed = 0;
    if (fp_wd_set_alarm_action(SIG_DFL) < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyBool_FromLong(mine);
}

static PyMethodDef fp_wd_methods[] = {
    {"_sigterm_watchdog", fp_wd_install, METH_NOARGS,
     "_sigterm_watchdog(): after a SIGTERM, nudge the main thread until the Python handler "
     "runs (it must call _sigterm_watchdog_cancel first), or end the process."},
    {"_sigterm_watchdog_cancel", fp_wd_cancel, METH_NOARGS,
     "_sigterm_watchdog_cancel(): stops the nudges; returns whether they were running."},
    {NULL, NULL, 0, NULL},
};

/* See common.h.  Returns 0, or -1 with an exception set. */
int
fp_watchdog_exec(PyObject *m)
{
    return PyModule_AddFunctions(m, fp_wd_methods);
}
