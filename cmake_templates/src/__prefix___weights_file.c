/*__banner__*/
/*
 * External weights (__PREFIX___EXTERNAL_WEIGHTS=ON): the library reads weights/__prefix___weights.bin
 * at run time instead of carrying the weights. The file must match the generated code: its
 * size and SHA-256 are compiled in and checked before the bytes are used. This file is the
 * same for every model; in builds with embedded weights the functions do nothing.
 */
#if defined(__unix__) || defined(__APPLE__)
#define _POSIX_C_SOURCE 200809L /* open, fstat, mmap under -std=c99 */
#endif
#include <string.h>

#include "__prefix___internal.h"

const unsigned char* __prefix___attached_weights = NULL;

int __prefix___weights_external(void) {
#ifdef __PREFIX___EXTERNAL_WEIGHTS
  return 1;
#else
  return 0;
#endif
}

#ifdef __PREFIX___EXTERNAL_WEIGHTS

/* SHA-256 (FIPS 180-4), enough to check one buffer. */
static const uint32_t __prefix___sha256_k[64] = {
  0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
  0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
  0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
  0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
  0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
  0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
  0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
  0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u,
};

#define __PREFIX___ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void __prefix___sha256_block(uint32_t state[8], const unsigned char* block) {
  uint32_t w[64], v[8];
  int i;
  for (i = 0; i < 16; ++i) {
    w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 | (uint32_t)block[4 * i + 2] << 8 |
           (uint32_t)block[4 * i + 3];
  }
  for (i = 16; i < 64; ++i) {
    uint32_t s0 = __PREFIX___ROR(w[i - 15], 7) ^ __PREFIX___ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = __PREFIX___ROR(w[i - 2], 17) ^ __PREFIX___ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  for (i = 0; i < 8; ++i) v[i] = state[i];
  for (i = 0; i < 64; ++i) {
    uint32_t s1 = __PREFIX___ROR(v[4], 6) ^ __PREFIX___ROR(v[4], 11) ^ __PREFIX___ROR(v[4], 25);
    uint32_t choice = (v[4] & v[5]) ^ (~v[4] & v[6]);
    uint32_t t1 = v[7] + s1 + choice + __prefix___sha256_k[i] + w[i];
    uint32_t s0 = __PREFIX___ROR(v[0], 2) ^ __PREFIX___ROR(v[0], 13) ^ __PREFIX___ROR(v[0], 22);
    uint32_t majority = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
    v[7] = v[6];
    v[6] = v[5];
    v[5] = v[4];
    v[4] = v[3] + t1;
    v[3] = v[2];
    v[2] = v[1];
    v[1] = v[0];
    v[0] = t1 + s0 + majority;
  }
  for (i = 0; i < 8; ++i) state[i] += v[i];
}

static void __prefix___sha256(const unsigned char* data, size_t bytes, unsigned char digest[32]) {
  uint32_t state[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                       0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
  unsigned char tail[128];
  size_t full = bytes / 64u * 64u, rest = bytes - full, tail_bytes, i;
  uint64_t bits = (uint64_t)bytes * 8u;
  for (i = 0; i < full; i += 64u) __prefix___sha256_block(state, data + i);
  /* The last partial block, a 1 bit, zeros, and the length in bits (big-endian). */
  memset(tail, 0, sizeof(tail));
  if (rest > 0) memcpy(tail, data + full, rest);
  tail[rest] = 0x80u;
  tail_bytes = rest + 9u <= 64u ? 64u : 128u;
  for (i = 0; i < 8; ++i) tail[tail_bytes - 1u - i] = (unsigned char)(bits >> (8u * i));
  for (i = 0; i < tail_bytes; i += 64u) __prefix___sha256_block(state, tail + i);
  for (i = 0; i < 8; ++i) {
    digest[4 * i] = (unsigned char)(state[i] >> 24);
    digest[4 * i + 1] = (unsigned char)(state[i] >> 16);
    digest[4 * i + 2] = (unsigned char)(state[i] >> 8);
    digest[4 * i + 3] = (unsigned char)state[i];
  }
}

__prefix___status __prefix___weights_attach(const void* data, size_t bytes) {
  unsigned char digest[32];
  if (data == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  if ((uintptr_t)data % __PREFIX___WORKSPACE_ALIGNMENT != 0) return __PREFIX___ERROR_WORKSPACE_MISALIGNED;
  if (bytes != __PREFIX___WEIGHTS_FILE_BYTES) return __PREFIX___ERROR_WEIGHTS_MISMATCH;
  __prefix___sha256((const unsigned char*)data, bytes, digest);
  if (memcmp(digest, __prefix___weights_sha256, sizeof(digest)) != 0) return __PREFIX___ERROR_WEIGHTS_MISMATCH;
  __prefix___attached_weights = (const unsigned char*)data;
  return __PREFIX___OK;
}

#ifndef __PREFIX___NO_MALLOC
#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Mapped read-only: pages come from the page cache, shared by every process using them. */
__prefix___status __prefix___weights_load(const char* path) {
  struct stat info;
  void* mapped;
  __prefix___status status;
  int fd;
  if (path == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  fd = open(path, O_RDONLY);
  if (fd < 0) return __PREFIX___ERROR_WEIGHTS_UNREADABLE;
  if (fstat(fd, &info) != 0) {
    close(fd);
    return __PREFIX___ERROR_WEIGHTS_UNREADABLE;
  }
  if ((size_t)info.st_size != __PREFIX___WEIGHTS_FILE_BYTES || info.st_size == 0) {
    close(fd);
    return info.st_size == 0 && __PREFIX___WEIGHTS_FILE_BYTES == 0 ? __PREFIX___OK : __PREFIX___ERROR_WEIGHTS_MISMATCH;
  }
  mapped = mmap(NULL, (size_t)info.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) return __PREFIX___ERROR_WEIGHTS_UNREADABLE;
  status = __prefix___weights_attach(mapped, (size_t)info.st_size);
  if (status != __PREFIX___OK) munmap(mapped, (size_t)info.st_size);
  return status;
}
#else
#include <stdio.h>
#include <stdlib.h>

/* Read into one 64-byte-aligned block that lives as long as the process. */
__prefix___status __prefix___weights_load(const char* path) {
  FILE* file;
  unsigned char* block;
  unsigned char* aligned;
  __prefix___status status;
  if (path == NULL) return __PREFIX___ERROR_NULL_ARGUMENT;
  file = fopen(path, "rb");
  if (file == NULL) return __PREFIX___ERROR_WEIGHTS_UNREADABLE;
  block = (unsigned char*)malloc(__PREFIX___WEIGHTS_FILE_BYTES + __PREFIX___WORKSPACE_ALIGNMENT + 1u);
  if (block == NULL) {
    fclose(file);
    return __PREFIX___ERROR_OUT_OF_MEMORY;
  }
  aligned = block + (__PREFIX___WORKSPACE_ALIGNMENT - (uintptr_t)block % __PREFIX___WORKSPACE_ALIGNMENT) % __PREFIX___WORKSPACE_ALIGNMENT;
  /* One byte more than expected: a longer file is a mismatch, not a silent truncation. */
  if (fread(aligned, 1, __PREFIX___WEIGHTS_FILE_BYTES + 1u, file) != __PREFIX___WEIGHTS_FILE_BYTES) {
    fclose(file);
    free(block);
    return __PREFIX___ERROR_WEIGHTS_MISMATCH;
  }
  fclose(file);
  status = __prefix___weights_attach(aligned, __PREFIX___WEIGHTS_FILE_BYTES);
  if (status != __PREFIX___OK) free(block);
  return status;
}
#endif
#endif /* __PREFIX___NO_MALLOC */

#else /* the weights are built in */

__prefix___status __prefix___weights_attach(const void* data, size_t bytes) {
  (void)data;
  (void)bytes;
  return __PREFIX___OK;
}

#ifndef __PREFIX___NO_MALLOC
__prefix___status __prefix___weights_load(const char* path) {
  (void)path;
  return __PREFIX___OK;
}
#endif

#endif /* __PREFIX___EXTERNAL_WEIGHTS */
