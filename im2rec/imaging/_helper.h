/* One helper thread per process that takes samples of a batch when a CPU
 * would otherwise be idle (included by _jpeg.c, used by _batch.h).
 *
 * A training loader's workers are as many as the CPUs, yet each sits idle
 * for part of an epoch: torch's DataLoader hands a worker its next batch
 * only as the batches before it are taken, in order, and the last batches
 * of an epoch are unequal, so a worker waits for part of the time. The
 * helper runs
 * under SCHED_IDLE, so the kernel gives it a CPU only when no ordinary
 * thread wants one: it takes samples of its own worker's batch while the
 * other worker waits, and never slows a busy machine. Where SCHED_IDLE is
 * refused (or not Linux), or IM2REC_HELPER=0, there is no helper and the
 * caller does all the work, as before.
 *
 * The work is a function over sample numbers 0..count-1, claimed one at a
 * time from a shared counter; the caller claims too, then waits until the
 * helper has left the work. The helper never touches Python. A forked
 * child (a DataLoader worker) starts its own helper: the parent's thread is
 * not copied by fork, so its state is made again when the pid changes.
 */
#ifndef IM2REC_HELPER_H
#define IM2REC_HELPER_H

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct Work {
    int count;
    int next;  /* the next sample to take (atomic) */
    void (*run)(struct Work *, int);
    void *ctx;
} Work;

static struct {
    pid_t pid;  /* the process this state belongs to; 0: not made yet */
    int usable;  /* a helper thread runs */
    pthread_mutex_t mu;
    pthread_cond_t wake, left;
    Work *work;  /* offered work, or NULL */
    unsigned long generation;  /* which work: the helper takes each once */
    int inside;  /* the helper is working on `work` */
    int started;  /* 0 until the helper says whether it runs: 1 yes, -1 no */
} helper;

static void work_take(Work *w) {
    for (;;) {
        const int k = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
        if (k >= w->count) return;
        w->run(w, k);
    }
}

static void *helper_main(void *arg) {
    (void)arg;
    unsigned long seen = 0;
    /* the policy is the thread's own (Linux), set before it takes any work:
       glibc's thread attributes do not take SCHED_IDLE */
    struct sched_param param = {0};
    const int idle = sched_setscheduler(0, SCHED_IDLE, &param) == 0;
    pthread_mutex_lock(&helper.mu);
    helper.started = idle ? 1 : -1;
    pthread_cond_signal(&helper.left);
    if (!idle) {  /* an ordinary thread would compete with the workers */
        pthread_mutex_unlock(&helper.mu);
        return NULL;
    }
    for (;;) {
        while (helper.work == NULL || helper.generation == seen)
            pthread_cond_wait(&helper.wake, &helper.mu);
        Work *w = helper.work;
        seen = helper.generation;
        helper.inside = 1;
        pthread_mutex_unlock(&helper.mu);
        work_take(w);
        pthread_mutex_lock(&helper.mu);
        helper.inside = 0;
        pthread_cond_signal(&helper.left);
    }
    return NULL;
}

/* Whether this process has a helper (made at the first call). */
static int helper_ready(void) {
    const pid_t pid = getpid();
    if (helper.pid == pid) return helper.usable;
    /* first call here, or a child of fork: the state is made anew */
    helper.pid = pid;
    helper.usable = 0;
    helper.work = NULL;
    helper.inside = 0;
    const char *off = getenv("IM2REC_HELPER");
    if (off != NULL && off[0] == '0') return 0;
#if defined(__linux__) && defined(SCHED_IDLE)
    if (pthread_mutex_init(&helper.mu, NULL) != 0) return 0;
    if (pthread_cond_init(&helper.wake, NULL) != 0 || pthread_cond_init(&helper.left, NULL) != 0)
        return 0;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return 0;
    pthread_t thread;
    helper.started = 0;
    int ok = pthread_attr_setstacksize(&attr, 1 << 20) == 0 &&
             pthread_create(&thread, &attr, helper_main, NULL) == 0;
    pthread_attr_destroy(&attr);
    if (ok) {
        pthread_detach(thread);
        pthread_mutex_lock(&helper.mu);  /* its word on SCHED_IDLE */
        while (helper.started == 0) pthread_cond_wait(&helper.left, &helper.mu);
        ok = helper.started == 1;
        pthread_mutex_unlock(&helper.mu);
    }
    helper.usable = ok;
#endif
    return helper.usable;
}

/* Run w->run(w, k) for every k, with the helper when there is one; returns
   when every sample is done. Called without the GIL. */
static void work_all(Work *w) {
    w->next = 0;
    if (w->count > 1 && helper_ready()) {
        pthread_mutex_lock(&helper.mu);
        helper.work = w;
        helper.generation++;
        pthread_cond_signal(&helper.wake);
        pthread_mutex_unlock(&helper.mu);
        work_take(w);
        pthread_mutex_lock(&helper.mu);
        helper.work = NULL;  /* (the helper takes no new work from here) */
        while (helper.inside) pthread_cond_wait(&helper.left, &helper.mu);
        pthread_mutex_unlock(&helper.mu);
        return;
    }
    work_take(w);
}

#endif
