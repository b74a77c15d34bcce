/*__banner__*/
/* See npy.h. Written for relay2cmake packages; no dependencies beyond the C library. */
#include "npy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_error(char* error, size_t error_bytes, const char* path, const char* what) {
  if (error != NULL && error_bytes > 0) snprintf(error, error_bytes, "%s: %s", path, what);
}

void npy_shape_text(int ndim, const int64_t* shape, char* text, size_t text_bytes) {
  size_t used = 0;
  int i;
  if (text_bytes == 0) return;
  used += (size_t)snprintf(text, text_bytes, "[");
  for (i = 0; i < ndim && used < text_bytes; ++i) {
    used += (size_t)snprintf(text + used, text_bytes - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
  }
  if (used < text_bytes) snprintf(text + used, text_bytes - used, "]");
}

/* Finds 'key': in the header dict and returns the text after the colon, or NULL. */
static const char* find_key(const char* header, const char* key) {
  const char* at = strstr(header, key);
  if (at == NULL) return NULL;
  at = strchr(at + strlen(key), ':');
  if (at == NULL) return NULL;
  ++at;
  while (*at == ' ') ++at;
  return at;
}

static int parse_header(const char* header, npy_array* out, char* error, size_t error_bytes, const char* path) {
  const char* descr = find_key(header, "'descr'");
  const char* fortran = find_key(header, "'fortran_order'");
  const char* shape = find_key(header, "'shape'");
  const char* end;
  size_t n;
  if (descr == NULL || fortran == NULL || shape == NULL || (*descr != '\'' && *descr != '"')) {
    set_error(error, error_bytes, path, "not a .npy file (header lacks descr, fortran_order or shape)");
    return 1;
  }
  end = strchr(descr + 1, *descr);
  n = end != NULL ? (size_t)(end - descr - 1) : 0;
  if (end == NULL || n == 0 || n >= sizeof(out->descr)) {
    set_error(error, error_bytes, path, "unreadable dtype in .npy header");
    return 1;
  }
  memcpy(out->descr, descr + 1, n);
  out->descr[n] = '\0';
  if (strncmp(fortran, "False", 5) != 0) {
    set_error(error, error_bytes, path, "Fortran-order arrays are not supported; save a C-order array");
    return 1;
  }
  if (*shape != '(') {
    set_error(error, error_bytes, path, "unreadable shape in .npy header");
    return 1;
  }
  ++shape;
  out->ndim = 0;
  out->num_elements = 1;
  for (;;) {
    char* next;
    long long dim;
    while (*shape == ' ' || *shape == ',') ++shape;
    if (*shape == ')') break;
    dim = strtoll(shape, &next, 10);
    if (next == shape || dim < 0 || out->ndim >= NPY_MAX_DIMS) {
      set_error(error, error_bytes, path, "unreadable shape in .npy header");
      return 1;
    }
    out->shape[out->ndim++] = dim;
    out->num_elements *= (size_t)dim;
    shape = next;
  }
  if (out->descr[0] != '<' && out->descr[0] != '|') {
    set_error(error, error_bytes, path, "only little-endian .npy data is supported");
    return 1;
  }
  out->item_bytes = (size_t)strtoul(out->descr + 2, NULL, 10);
  if (out->item_bytes == 0 || strchr("fiubV", out->descr[1]) == NULL) {
    set_error(error, error_bytes, path, "unsupported dtype in .npy file");
    return 1;
  }
  out->data_bytes = out->num_elements * out->item_bytes;
  return 0;
}

int npy_read(const char* path, npy_array* out, char* error, size_t error_bytes) {
  unsigned char preamble[12];
  size_t header_bytes, got;
  char* header;
  FILE* file;
  long position, file_end;
  memset(out, 0, sizeof(*out));
  file = fopen(path, "rb");
  if (file == NULL) {
    set_error(error, error_bytes, path, "cannot open");
    return 1;
  }
  got = fread(preamble, 1, 10, file);
  if (got != 10 || memcmp(preamble, "\x93NUMPY", 6) != 0 || preamble[6] < 1 || preamble[6] > 3) {
    set_error(error, error_bytes, path, "not a .npy file (bad magic)");
    fclose(file);
    return 1;
  }
  if (preamble[6] == 1) {
    header_bytes = (size_t)preamble[8] | ((size_t)preamble[9] << 8);
  } else {
    if (fread(preamble + 10, 1, 2, file) != 2) {
      set_error(error, error_bytes, path, "truncated .npy header");
      fclose(file);
      return 1;
    }
    header_bytes = (size_t)preamble[8] | ((size_t)preamble[9] << 8) | ((size_t)preamble[10] << 16) |
                   ((size_t)preamble[11] << 24);
  }
  if (header_bytes > (1u << 20)) {
    set_error(error, error_bytes, path, "implausible .npy header length");
    fclose(file);
    return 1;
  }
  header = (char*)malloc(header_bytes + 1);
  if (header == NULL || fread(header, 1, header_bytes, file) != header_bytes) {
    set_error(error, error_bytes, path, "truncated .npy header");
    free(header);
    fclose(file);
    return 1;
  }
  header[header_bytes] = '\0';
  if (parse_header(header, out, error, error_bytes, path) != 0) {
    free(header);
    fclose(file);
    return 1;
  }
  free(header);
  position = ftell(file);
  fseek(file, 0, SEEK_END);
  file_end = ftell(file);
  fseek(file, position, SEEK_SET);
  if (position < 0 || file_end < position || (size_t)(file_end - position) != out->data_bytes) {
    set_error(error, error_bytes, path, "data size does not match the header (truncated or corrupt .npy)");
    fclose(file);
    return 1;
  }
  out->block = malloc(out->data_bytes + 64u);
  if (out->block != NULL) out->data = (unsigned char*)out->block + (64u - (uintptr_t)out->block % 64u) % 64u;
  if (out->data == NULL || fread(out->data, 1, out->data_bytes, file) != out->data_bytes) {
    set_error(error, error_bytes, path, "cannot read the data");
    npy_free(out);
    fclose(file);
    return 1;
  }
  fclose(file);
  return 0;
}

int npy_write(const char* path, const char* descr, int ndim, const int64_t* shape, const void* data,
              size_t data_bytes, char* error, size_t error_bytes) {
  char header[1024];
  size_t used, total;
  int i;
  FILE* file;
  used = (size_t)snprintf(header, sizeof(header), "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (i = 0; i < ndim && used < sizeof(header); ++i) {
    used += (size_t)snprintf(header + used, sizeof(header) - used, "%lld,%s", (long long)shape[i],
                             (ndim > 1 && i + 1 < ndim) ? " " : "");
  }
  if (used + 80 > sizeof(header)) {
    set_error(error, error_bytes, path, "shape too long for a .npy header");
    return 1;
  }
  used += (size_t)snprintf(header + used, sizeof(header) - used, "), }");
  /* Pad with spaces so that the data starts on a 64-byte boundary, then a newline. */
  total = 10 + used + 1;
  while (total % 64 != 0) header[used++] = ' ', ++total;
  header[used++] = '\n';
  file = fopen(path, "wb");
  if (file == NULL) {
    set_error(error, error_bytes, path, "cannot create the file");
    return 1;
  }
  {
    unsigned char preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    preamble[8] = (unsigned char)(used & 0xff);
    preamble[9] = (unsigned char)(used >> 8);
    if (fwrite(preamble, 1, 10, file) != 10 || fwrite(header, 1, used, file) != used ||
        (data_bytes > 0 && fwrite(data, 1, data_bytes, file) != data_bytes)) {
      set_error(error, error_bytes, path, "write failed");
      fclose(file);
      return 1;
    }
  }
  if (fclose(file) != 0) {
    set_error(error, error_bytes, path, "write failed");
    return 1;
  }
  return 0;
}

void npy_free(npy_array* array) {
  free(array->block);
  array->block = NULL;
  array->data = NULL;
}

int npy_read_blob(const char* path, npy_blob* out, char* error, size_t error_bytes) {
  FILE* file = fopen(path, "rb");
  long size;
  memset(out, 0, sizeof(*out));
  if (file == NULL) {
    snprintf(error, error_bytes, "cannot open %s", path);
    return 1;
  }
  if (fseek(file, 0, SEEK_END) != 0 || (size = ftell(file)) < 0 || fseek(file, 0, SEEK_SET) != 0) {
    fclose(file);
    snprintf(error, error_bytes, "cannot read %s", path);
    return 1;
  }
  out->block = malloc((size_t)size + 64u);
  if (out->block == NULL) {
    fclose(file);
    snprintf(error, error_bytes, "out of memory for %s (%ld bytes)", path, size);
    return 1;
  }
  out->data = (unsigned char*)out->block + (64u - (uintptr_t)out->block % 64u) % 64u;
  out->bytes = (size_t)size;
  if (fread(out->data, 1, out->bytes, file) != out->bytes) {
    fclose(file);
    npy_free_blob(out);
    snprintf(error, error_bytes, "cannot read %s", path);
    return 1;
  }
  fclose(file);
  return 0;
}

void npy_free_blob(npy_blob* blob) {
  free(blob->block);
  memset(blob, 0, sizeof(*blob));
}

static double half_to_double(uint16_t h) {
  int exponent = (h >> 10) & 0x1f;
  int mantissa = h & 0x3ff;
  double value;
  if (exponent == 0) {
    value = mantissa / 16777216.0; /* 2^-24 */
  } else if (exponent == 31) {
    value = mantissa ? (double)NAN : (double)INFINITY;
  } else {
    value = (1.0 + mantissa / 1024.0);
    for (; exponent > 15; --exponent) value *= 2.0;
    for (; exponent < 15; ++exponent) value /= 2.0;
  }
  return (h & 0x8000) ? -value : value;
}

double npy_bfloat16(const void* data, size_t i) {
  const unsigned char* at = (const unsigned char*)data + 2 * i;
  uint16_t h;
  uint32_t bits;
  float f;
  memcpy(&h, at, 2);
  bits = (uint32_t)h << 16; /* bfloat16 is the upper half of a float32 */
  memcpy(&f, &bits, 4);
  return f;
}

int npy_descr_accepted(const char* want, const char* got, int raw_bits) {
  size_t want_size = (size_t)strtoul(want + 2, NULL, 10);
  size_t got_size = (size_t)strtoul(got + 2, NULL, 10);
  if (strcmp(want, got) == 0) return 1;
  /* ml_dtypes saves bfloat16 and float8 arrays as void ("<V2") or, for float8_e5m2, "<f1" */
  if (!raw_bits || want_size != got_size) return 0;
  return got[1] == 'V' || (got[1] == 'f' && got_size == 1);
}

size_t npy_pack_bits(void* data, size_t elements, int element_bits) {
  unsigned char* bytes = (unsigned char*)data;
  size_t per_byte = (size_t)(8 / element_bits), i;
  unsigned mask = (1u << element_bits) - 1u;
  size_t packed = (elements * (size_t)element_bits + 7u) / 8u;
  /* Byte j is written after elements j * per_byte.. are read, and j <= j * per_byte. */
  for (i = 0; i < packed; ++i) {
    unsigned value = 0;
    size_t lane;
    for (lane = 0; lane < per_byte && i * per_byte + lane < elements; ++lane) {
      value |= (bytes[i * per_byte + lane] & mask) << (lane * (size_t)element_bits);
    }
    bytes[i] = (unsigned char)value;
  }
  return packed;
}

unsigned npy_packed_element(const void* packed, size_t i, int element_bits) {
  size_t per_byte = (size_t)(8 / element_bits);
  unsigned byte = ((const unsigned char*)packed)[i / per_byte];
  return (byte >> ((i % per_byte) * (size_t)element_bits)) & ((1u << element_bits) - 1u);
}

void npy_unpack_bits(const void* packed, size_t elements, int element_bits, void* out) {
  size_t i;
  for (i = 0; i < elements; ++i) {
    ((unsigned char*)out)[i] = (unsigned char)npy_packed_element(packed, i, element_bits);
  }
}

double npy_element(const char* descr, const void* data, size_t i) {
  const unsigned char* bytes = (const unsigned char*)data;
  char kind = descr[1];
  size_t size = (size_t)strtoul(descr + 2, NULL, 10);
  const unsigned char* at = bytes + i * size;
  if (kind == 'f') {
    if (size == 2) {
      uint16_t h;
      memcpy(&h, at, 2);
      return half_to_double(h);
    }
    if (size == 4) {
      float f;
      memcpy(&f, at, 4);
      return f;
    }
    {
      double d;
      memcpy(&d, at, 8);
      return d;
    }
  }
  if (kind == 'b' || (kind == 'u' && size == 1)) return at[0];
  if (kind == 'i') {
    if (size == 1) return (double)(int8_t)at[0];
    if (size == 2) { int16_t v; memcpy(&v, at, 2); return v; }
    if (size == 4) { int32_t v; memcpy(&v, at, 4); return v; }
    { int64_t v; memcpy(&v, at, 8); return (double)v; }
  }
  if (size == 2) { uint16_t v; memcpy(&v, at, 2); return v; }
  if (size == 4) { uint32_t v; memcpy(&v, at, 4); return v; }
  { uint64_t v; memcpy(&v, at, 8); return (double)v; }
}
