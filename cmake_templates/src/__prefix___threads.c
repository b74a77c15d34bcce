/*__banner__*/
/*
 * The thread pool behind the kernels' parallel loops. Each context owns threads - 1 workers.
 * A parallel loop is cut into more tasks than threads (TVM's parallel lambdas take any task
 * count and split their range by it), in one range of consecutive tasks per thread. Every
 * thread that is awake claims tasks one at a time, from its own range first and then from
 * the others', so a worker the OS has descheduled (another program on its core) holds up at
 * most the one task it runs, never a share fixed in advance, and a worker that wakes late
 * finds the loop done and goes back to waiting. Own ranges first keep each thread on the
 * same part of every loop, which is mostly the part of the data it wrote in the loop
 * before, still in its own cache: claimed from one shared counter, the parts fell to the
 * threads at random and a core read half its data from the other's cache (2 threads, Intel
 * Xeon, medians of 6 interleaved runs: HRNet-W18-small 12.4 ms against 13.2, Inception v3
 * 39.9 against 41.3, ViT-Tiny 11.2 against 11.6).
 *
 * The caller never waits for a worker to *leave* a loop: the loop's generation and a
 * range's next task share one word, claimed by compare-and-swap, so a worker that was
 * descheduled halfway through a claim fails it and the next loop starts at once.
 *
 * Parallel loops only pay when the workers' cores are free: when other programs keep them
 * busy, every loop waits for a worker the OS has descheduled, and two threads can take twice
 * as long as one. The pool therefore times whole runs (a model does the same work every
 * run) and keeps two running means, with its workers and on the caller alone; runs go the
 * faster way, and every __PREFIX___PROBE_EVERY-th run tries the other, so the choice follows
 * the machine as its load comes and goes. A quiet machine keeps its speed-up; a busy one
 * costs about what one thread does. Build with -D__PREFIX___ADAPTIVE_THREADS=0 to always use
 * the workers.
 *
 * Waiting is polite: a short spin that yields the core now and then, then a condition
 * variable (workers) or sched_yield (the caller, for the last tasks in flight). Without
 * pthreads (__PREFIX___THREADS 0: bare metal, or a build that asked for none) every loop runs
 * serially on the caller's thread.
 */
#if !defined(_POSIX_C_SOURCE) && !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c99 */
#endif
#include "__prefix___internal.h"

#if __PREFIX___THREADS

#include <sched.h>
#include <time.h>

/* Waking a sleeping worker costs tens of microseconds, more than many kernels take, so an
 * idle worker spins for a while first, yielding its core every __PREFIX___YIELD_EVERY spins
 * so that a busy machine loses little to it. The while is measured on the clock, not in
 * spins: on a busy machine each yield can last a time slice, and a worker that stays
 * runnable that long takes its share of a core from the caller. The counters use the
 * __atomic builtins of gcc and clang (pthreads builds only), sequentially consistent. */
#ifndef __PREFIX___SPIN_NS
#define __PREFIX___SPIN_NS 500000u
#endif
#define __PREFIX___YIELD_EVERY 64
/* Tasks per thread in a parallel loop: enough that a stalled worker's task is small, few
 * enough that each task still has a long contiguous range (measured on BERT, DenseNet-121,
 * EfficientNet-B0 and MobileNet v3 with a busy neighbour: benchmarks/threads.py). Both can
 * be set with -D at build time. */
#ifndef __PREFIX___TASKS_PER_THREAD
#define __PREFIX___TASKS_PER_THREAD 4
#endif
/* Runs between two tries of the way not chosen (see the top of this file). */
#ifndef __PREFIX___ADAPTIVE_THREADS
#define __PREFIX___ADAPTIVE_THREADS 1
#endif
#define __PREFIX___PROBE_EVERY 16
#if defined(__x86_64__) || defined(__i386__)
#define __PREFIX___RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define __PREFIX___RELAX() __asm__ __volatile__("yield")
#else
#define __PREFIX___RELAX() ((void)0)
#endif
#define __PREFIX___LOAD(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define __PREFIX___STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)
#define __PREFIX___ADD(x, v) __atomic_add_fetch(&(x), (v), __ATOMIC_SEQ_CST)
/* A range's word (__prefix___pool): the loop's generation, the range's end and next task. */
#define __PREFIX___GENERATION(word) ((uint32_t)((word) >> 32))
#define __PREFIX___WORD(generation, end, next) (((uint64_t)(generation) << 32) | ((uint32_t)(end) << 16) | (next))
#define __PREFIX___NEXT(word) ((uint32_t)(word)&0xffffu)
#define __PREFIX___END(word) (((uint32_t)(word) >> 16) & 0xffffu)
#define __PREFIX___MAX_TASKS 0xffff
/* Whose word announces a loop: the caller's range's. */
#define __PREFIX___ANNOUNCE(pool) ((pool)->ranges[0])

static uint64_t __prefix___now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
/* The clock that times runs (nanoseconds); a test names its own to script run times. */
#ifdef __PREFIX___RUN_CLOCK
uint64_t __PREFIX___RUN_CLOCK(void);
#else
#define __PREFIX___RUN_CLOCK __prefix___now_ns
#endif

/* One spin step of a waiting thread: a pause, and every so often the core given away. */
static void __prefix___relax(int spins) {
  if (spins % __PREFIX___YIELD_EVERY == __PREFIX___YIELD_EVERY - 1) {
    sched_yield();
  } else {
    __PREFIX___RELAX();
  }
}

/* Claims and runs tasks of loop `generation` until none is left: thread `self`'s own range
 * first, then the others' in turn. A claim succeeds only while the range's word still holds
 * this generation, so the job fields read after it are this loop's (the caller rewrites them
 * only once every claimed task is done). A failure is recorded before its task counts as
 * done, so the caller sees it once every task is. */
static void __prefix___run_tasks(__prefix___pool* pool, uint32_t generation, int self) {
  int turn;
  for (turn = 0; turn < pool->threads; ++turn) {
    uint64_t* range = &pool->ranges[(self + turn) % pool->threads];
    for (;;) {
      uint64_t word = __PREFIX___LOAD(*range);
      uint32_t task = __PREFIX___NEXT(word);
      int rc;
      if (__PREFIX___GENERATION(word) != generation) return; /* the loop is over */
      if (task >= __PREFIX___END(word)) break;               /* this range is done: the next */
      if (!__atomic_compare_exchange_n(range, &word, word + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        continue;
      }
      rc = pool->lambda((int)task, &pool->env, pool->cdata);
      if (rc != 0) __PREFIX___STORE(pool->status, rc);
      __PREFIX___ADD(pool->tasks_done, 1);
    }
  }
}

/* Whether an idle worker should go on spinning: no new loop yet, the pool not stopping
 * and not running on the caller alone, and the spin not over its time (checked at each
 * yield, where the clock costs nothing next to the system call). */
static int __prefix___keep_spinning(__prefix___pool* pool, uint32_t seen, int spins, uint64_t since) {
  if (__PREFIX___GENERATION(__PREFIX___LOAD(__PREFIX___ANNOUNCE(pool))) != seen) return 0;
  if (__PREFIX___LOAD(pool->stop) || __PREFIX___LOAD(pool->parked)) return 0;
  if (spins % __PREFIX___YIELD_EVERY == __PREFIX___YIELD_EVERY - 1) {
    return __prefix___now_ns() - since < __PREFIX___SPIN_NS;
  }
  return 1;
}

static void* __prefix___worker_main(void* argument) {
  __prefix___worker* self = (__prefix___worker*)argument;
  __prefix___pool* pool = self->pool;
  uint32_t seen = 0; /* the generation restarts at 0 before workers start */
  (void)__prefix___float_mode_flush(); /* as the caller's thread computes (internal.h) */
  for (;;) {
    int spins;
    uint32_t generation;
    uint64_t since = __prefix___now_ns();
    for (spins = 0; __prefix___keep_spinning(pool, seen, spins, since); ++spins) __prefix___relax(spins);
    if (__PREFIX___GENERATION(__PREFIX___LOAD(__PREFIX___ANNOUNCE(pool))) == seen && !__PREFIX___LOAD(pool->stop)) {
      pthread_mutex_lock(&pool->lock);
      __PREFIX___ADD(pool->sleepers, 1);
      while (!__PREFIX___LOAD(pool->stop) && __PREFIX___GENERATION(__PREFIX___LOAD(__PREFIX___ANNOUNCE(pool))) == seen) {
        pthread_cond_wait(&pool->wake, &pool->lock);
      }
      __PREFIX___ADD(pool->sleepers, -1);
      pthread_mutex_unlock(&pool->lock);
    }
    if (__PREFIX___LOAD(pool->stop)) break;
    generation = __PREFIX___GENERATION(__PREFIX___LOAD(__PREFIX___ANNOUNCE(pool)));
    seen = generation;
    if ((generation & 1u) == 0) __prefix___run_tasks(pool, generation, self->id); /* odd: being set up */
  }
  return NULL;
}

void __prefix___pool_stop(__prefix___pool* pool) {
  int i;
  if (pool->workers_started == 0) {
    pool->threads = 1;
    return;
  }
  pthread_mutex_lock(&pool->lock);
  __PREFIX___STORE(pool->stop, 1);
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->lock);
  for (i = 1; i <= pool->workers_started; ++i) pthread_join(pool->handles[i], NULL);
  pthread_cond_destroy(&pool->wake);
  pthread_mutex_destroy(&pool->lock);
  pool->workers_started = 0;
  pool->stop = 0;
  pool->threads = 1;
}

__prefix___status __prefix___pool_set_threads(__prefix___pool* pool, int threads) {
  int i;
  __prefix___pool_stop(pool);
  if (threads <= 1) return __PREFIX___OK;
  if (pthread_mutex_init(&pool->lock, NULL) != 0) return __PREFIX___ERROR_THREADS;
  if (pthread_cond_init(&pool->wake, NULL) != 0) {
    pthread_mutex_destroy(&pool->lock);
    return __PREFIX___ERROR_THREADS;
  }
  for (i = 0; i < threads; ++i) pool->ranges[i] = 0;
  pool->sleepers = 0;
  pool->run_serially = 0;
  pool->parked = 0;
  pool->runs = 0;
  pool->mean_ns[0] = 0;
  pool->mean_ns[1] = 0;
  for (i = 1; i < threads; ++i) {
    pool->workers[i].pool = pool;
    pool->workers[i].id = i;
    if (pthread_create(&pool->handles[i], NULL, __prefix___worker_main, &pool->workers[i]) != 0) {
      pool->workers_started = i - 1;
      __prefix___pool_stop(pool);
      return __PREFIX___ERROR_THREADS;
    }
    pool->workers_started = i;
  }
  pool->threads = threads;
  return __PREFIX___OK;
}

static int __prefix___run_serially(FTVMParallelLambda lambda, void* cdata) {
  TVMParallelGroupEnv env;
  env.sync_handle = NULL;
  env.num_task = 1;
  return lambda(0, &env, cdata);
}

/* Which way this run's loops go: the faster mean so far, the other one every
 * __PREFIX___PROBE_EVERY-th run. The first two runs (cold caches, page faults) use the
 * workers and are not counted; the third is the first on the caller alone. */
void __prefix___pool_run_begin(__prefix___pool* pool) {
  int faster;
  pool->run_serially = 0;
  pool->threads_used = pool->threads;
  if (pool->threads <= 1 || !__PREFIX___ADAPTIVE_THREADS) return;
  pool->run_started_ns = __PREFIX___RUN_CLOCK();
  if (pool->runs < 3) {
    pool->run_serially = pool->runs == 2;
  } else {
    faster = pool->mean_ns[1] < pool->mean_ns[0];
    pool->run_serially = pool->runs % __PREFIX___PROBE_EVERY == 0 ? !faster : faster;
  }
  if (pool->run_serially) {
    pool->threads_used = 1;
    /* Workers still spinning from the last run go to sleep at once: runnable, they would
     * take their share of a busy core from the caller. */
    __PREFIX___STORE(pool->parked, 1);
  }
}

/* The run's time joins the mean of the way it went: a quarter of it for the way chosen
 * (runs every time), half for a try of the other (rare, so it must count). */
void __prefix___pool_run_end(__prefix___pool* pool, int succeeded) {
  uint64_t took, *mean;
  if (pool->threads <= 1 || !__PREFIX___ADAPTIVE_THREADS) return;
  took = __PREFIX___RUN_CLOCK() - pool->run_started_ns;
  mean = &pool->mean_ns[pool->run_serially];
  if (succeeded && pool->runs >= 2) {
    if (*mean == 0) {
      *mean = took;
    } else if ((pool->mean_ns[1] < pool->mean_ns[0]) == pool->run_serially) {
      *mean = (*mean * 3 + took) / 4;
    } else {
      *mean = (*mean + took) / 2;
    }
  }
  pool->runs += 1;
  pool->run_serially = 0;
  __PREFIX___STORE(pool->parked, 0);
}

int __prefix___pool_run(__prefix___pool* pool, FTVMParallelLambda lambda, void* cdata, int num_task) {
  int tasks = num_task > 0 ? num_task : pool->threads * __PREFIX___TASKS_PER_THREAD;
  uint32_t generation;
  int spins, i;
  if (pool->threads <= 1 || tasks <= 1 || pool->run_serially) return __prefix___run_serially(lambda, cdata);
  if (tasks > __PREFIX___MAX_TASKS) tasks = __PREFIX___MAX_TASKS;
  /* Close the last loop (odd generation: every claim of it now fails), set this one up,
   * then publish it, the announcing range last. The last loop's tasks are all done: its
   * caller waited for them. A late worker may still be failing a claim on a word, so even
   * this read is atomic. */
  generation = __PREFIX___GENERATION(__PREFIX___LOAD(__PREFIX___ANNOUNCE(pool))) + 1;
  for (i = 0; i < pool->threads; ++i) __PREFIX___STORE(pool->ranges[i], __PREFIX___WORD(generation, 0, 0));
  pool->lambda = lambda;
  pool->cdata = cdata;
  pool->env.sync_handle = NULL;
  pool->env.num_task = tasks;
  __PREFIX___STORE(pool->status, 0);
  __PREFIX___STORE(pool->tasks_done, 0);
  generation += 1;
  for (i = pool->threads - 1; i >= 0; --i) { /* thread i's range: the i-th of as equal ones */
    uint32_t first = (uint32_t)(tasks * i / pool->threads), end = (uint32_t)(tasks * (i + 1) / pool->threads);
    __PREFIX___STORE(pool->ranges[i], __PREFIX___WORD(generation, end, first));
  }
  if (__PREFIX___LOAD(pool->sleepers) > 0) { /* a sleeper checks the generation under the lock */
    pthread_mutex_lock(&pool->lock);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
  }
  __prefix___run_tasks(pool, generation, 0);
  /* The tasks other threads still run: the caller gives its core away while it waits. */
  for (spins = 0; __PREFIX___LOAD(pool->tasks_done) < tasks; ++spins) __prefix___relax(spins);
  return __PREFIX___LOAD(pool->status);
}

#else /* no threads */

void __prefix___pool_stop(__prefix___pool* pool) { pool->threads = 1; }

void __prefix___pool_run_begin(__prefix___pool* pool) { pool->threads_used = 1; }

void __prefix___pool_run_end(__prefix___pool* pool, int succeeded) {
  (void)pool;
  (void)succeeded;
}

__prefix___status __prefix___pool_set_threads(__prefix___pool* pool, int threads) {
  pool->threads = 1;
  return threads <= 1 ? __PREFIX___OK : __PREFIX___ERROR_THREADS;
}

int __prefix___pool_run(__prefix___pool* pool, FTVMParallelLambda lambda, void* cdata, int num_task) {
  TVMParallelGroupEnv env;
  (void)pool;
  (void)num_task;
  env.sync_handle = NULL;
  env.num_task = 1;
  return lambda(0, &env, cdata);
}

#endif
