/*__banner__*/
/*
 * The thread pool behind the kernels' parallel loops. Each context owns threads - 1 workers.
 * A parallel loop is cut into more tasks than threads (TVM's parallel lambdas take any task
 * count and split their range by it); the caller and every worker that is awake claim tasks
 * one at a time from a shared counter until none is left, so a worker the OS has
 * descheduled (another program on its core) holds up at most the one task it runs, never a
 * share fixed in advance, and a worker that wakes late finds the loop done and goes back to
 * waiting. Waiting is polite: a short spin that yields the core now and then, then a
 * condition variable (workers) or sched_yield (the caller, for the last tasks in flight).
 * Without pthreads (__PREFIX___THREADS 0: bare metal, or a build that asked for none) every
 * loop runs serially on the caller's thread.
 */
#include "__prefix___internal.h"

#if __PREFIX___THREADS

#include <sched.h>

/* Waking a sleeping worker costs tens of microseconds, more than many kernels take, so an
 * idle worker spins for a while first (about 0.5-1 ms), yielding its core every
 * __PREFIX___YIELD_EVERY spins so that a busy machine loses little to it. The counters use
 * the __atomic builtins of gcc and clang (pthreads builds only), sequentially consistent. */
#ifndef __PREFIX___SPINS
#define __PREFIX___SPINS 16384
#endif
#define __PREFIX___YIELD_EVERY 64
/* Tasks per thread in a parallel loop: enough that a stalled worker's task is small, few
 * enough that each task still has a long contiguous range (measured on BERT, DenseNet-121,
 * EfficientNet-B0 and MobileNet v3 with a busy neighbour: benchmarks/threads.py). Both can
 * be set with -D at build time. */
#ifndef __PREFIX___TASKS_PER_THREAD
#define __PREFIX___TASKS_PER_THREAD 4
#endif
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

/* One spin step of a waiting thread: a pause, and every so often the core given away. */
static void __prefix___relax(int spins) {
  if (spins % __PREFIX___YIELD_EVERY == __PREFIX___YIELD_EVERY - 1) {
    sched_yield();
  } else {
    __PREFIX___RELAX();
  }
}

/* Claims and runs the current loop's tasks until none is left. A failure is recorded before
 * its task counts as done, so the caller sees it once every task is. */
static void __prefix___run_tasks(__prefix___pool* pool) {
  for (;;) {
    int task = __PREFIX___ADD(pool->next_task, 1) - 1;
    int rc;
    if (task >= pool->env.num_task) return;
    rc = pool->lambda(task, &pool->env, pool->cdata);
    if (rc != 0) __PREFIX___STORE(pool->status, rc);
    __PREFIX___ADD(pool->tasks_done, 1);
  }
}

static void* __prefix___worker_main(void* argument) {
  __prefix___worker* self = (__prefix___worker*)argument;
  __prefix___pool* pool = self->pool;
  unsigned long seen = 0; /* generation restarts at 0 before workers start */
  for (;;) {
    int spins;
    unsigned long generation;
    for (spins = 0; spins < __PREFIX___SPINS; ++spins) {
      if (__PREFIX___LOAD(pool->generation) != seen || __PREFIX___LOAD(pool->stop)) break;
      __prefix___relax(spins);
    }
    if (__PREFIX___LOAD(pool->generation) == seen && !__PREFIX___LOAD(pool->stop)) {
      pthread_mutex_lock(&pool->lock);
      __PREFIX___ADD(pool->sleepers, 1);
      while (!__PREFIX___LOAD(pool->stop) && __PREFIX___LOAD(pool->generation) == seen) {
        pthread_cond_wait(&pool->wake, &pool->lock);
      }
      __PREFIX___ADD(pool->sleepers, -1);
      pthread_mutex_unlock(&pool->lock);
    }
    if (__PREFIX___LOAD(pool->stop)) break;
    generation = __PREFIX___LOAD(pool->generation);
    seen = generation;
    if (generation & 1ul) continue; /* the caller is setting up the next loop: wait for it */
    /* Inside the loop from here: the caller sets up no other loop until this worker leaves.
     * Entering is checked again after the count is raised, so a loop that closed meanwhile
     * is never entered (its job fields may already belong to the next one). */
    __PREFIX___ADD(pool->inside, 1);
    if (__PREFIX___LOAD(pool->generation) == generation) __prefix___run_tasks(pool);
    __PREFIX___ADD(pool->inside, -1);
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
  pool->generation = 0;
  pool->inside = 0;
  pool->sleepers = 0;
  pool->env.num_task = 0;
  pool->next_task = 0;
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

int __prefix___pool_run(__prefix___pool* pool, FTVMParallelLambda lambda, void* cdata, int num_task) {
  int tasks = num_task > 0 ? num_task : pool->threads * __PREFIX___TASKS_PER_THREAD;
  int spins;
  if (pool->threads <= 1 || tasks <= 1) {
    TVMParallelGroupEnv env;
    env.sync_handle = NULL;
    env.num_task = 1;
    return lambda(0, &env, cdata);
  }
  /* Close the last loop (odd generation), wait for the workers still inside it to leave
   * (each only notices that nothing is left to claim), then publish this one. */
  __PREFIX___ADD(pool->generation, 1);
  for (spins = 0; __PREFIX___LOAD(pool->inside) > 0; ++spins) __prefix___relax(spins);
  pool->lambda = lambda;
  pool->cdata = cdata;
  pool->env.sync_handle = NULL;
  pool->env.num_task = tasks;
  __PREFIX___STORE(pool->status, 0);
  __PREFIX___STORE(pool->tasks_done, 0);
  __PREFIX___STORE(pool->next_task, 0);
  __PREFIX___ADD(pool->generation, 1);
  if (__PREFIX___LOAD(pool->sleepers) > 0) { /* a sleeper checks the generation under the lock */
    pthread_mutex_lock(&pool->lock);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
  }
  __prefix___run_tasks(pool);
  /* The tasks other threads still run: the caller gives its core away while it waits. */
  for (spins = 0; __PREFIX___LOAD(pool->tasks_done) < tasks; ++spins) __prefix___relax(spins);
  return __PREFIX___LOAD(pool->status);
}

#else /* no threads */

void __prefix___pool_stop(__prefix___pool* pool) { pool->threads = 1; }

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
