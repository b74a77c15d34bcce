/*__banner__*/
/*
 * The thread pool behind the kernels' parallel loops: each context owns threads - 1
 * workers that wait for a new generation of work (spinning briefly, then on a condition
 * variable); a parallel loop publishes one, the caller runs task 0 itself, and the loop
 * ends when every task has. Without pthreads
 * (__PREFIX___THREADS 0: bare metal, or a build that asked for none) every loop runs
 * serially on the caller's thread.
 */
#include "__prefix___internal.h"

#if __PREFIX___THREADS

/* Wake-up by futex alone costs tens of microseconds, more than many kernels take: workers
 * first spin on the generation counter for a while (about a millisecond), then sleep. The
 * counters use the __atomic builtins of gcc and clang (pthreads builds only). */
#define __PREFIX___SPINS 20000
#if defined(__x86_64__) || defined(__i386__)
#define __PREFIX___RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define __PREFIX___RELAX() __asm__ __volatile__("yield")
#else
#define __PREFIX___RELAX() ((void)0)
#endif
#define __PREFIX___LOAD(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define __PREFIX___STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)

static void* __prefix___worker_main(void* argument) {
  __prefix___worker* self = (__prefix___worker*)argument;
  __prefix___pool* pool = self->pool;
  unsigned long seen = 0; /* generation restarts at 0 before workers start */
  for (;;) {
    int spins, rc;
    for (spins = 0; spins < __PREFIX___SPINS; ++spins) {
      if (__PREFIX___LOAD(pool->generation) != seen || __PREFIX___LOAD(pool->stop)) break;
      __PREFIX___RELAX();
    }
    if (__PREFIX___LOAD(pool->generation) == seen && !__PREFIX___LOAD(pool->stop)) {
      pthread_mutex_lock(&pool->lock);
      while (!__PREFIX___LOAD(pool->stop) && __PREFIX___LOAD(pool->generation) == seen) {
        pthread_cond_wait(&pool->wake, &pool->lock);
      }
      pthread_mutex_unlock(&pool->lock);
    }
    if (__PREFIX___LOAD(pool->stop)) break;
    seen = __PREFIX___LOAD(pool->generation);
    if (self->id >= pool->env.num_task) continue; /* this loop has fewer tasks than workers */
    rc = pool->lambda(self->id, &pool->env, pool->cdata);
    if (rc != 0) __PREFIX___STORE(pool->status, rc);
    __atomic_sub_fetch(&pool->pending, 1, __ATOMIC_ACQ_REL);
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
  pool->env.num_task = 1;
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
  int tasks = pool->threads;
  int rc, status;
  if (num_task > 0 && num_task < tasks) tasks = num_task;
  if (tasks <= 1) {
    TVMParallelGroupEnv env;
    env.sync_handle = NULL;
    env.num_task = 1;
    return lambda(0, &env, cdata);
  }
  pool->lambda = lambda;
  pool->cdata = cdata;
  pool->env.sync_handle = NULL;
  pool->env.num_task = tasks;
  pool->status = 0;
  __PREFIX___STORE(pool->pending, tasks - 1);
  /* Publishes the job: workers read it after they see the new generation. */
  __atomic_add_fetch(&pool->generation, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_lock(&pool->lock); /* wakes the workers that went to sleep */
  pthread_cond_broadcast(&pool->wake);
  pthread_mutex_unlock(&pool->lock);
  rc = lambda(0, &pool->env, cdata);
  while (__PREFIX___LOAD(pool->pending) > 0) __PREFIX___RELAX();
  status = __PREFIX___LOAD(pool->status);
  return rc != 0 ? rc : status;
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
