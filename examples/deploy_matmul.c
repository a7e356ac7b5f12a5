/* Tunes a matmul on the host with `tessel tune`, packs the winner with `tessel pack`, then loads
 * the best kernel through libtessel_runtime, from the tuning log and from the pack, launches it on
 * this program's own buffers and checks the result against a plain C reference.
 *
 *   deploy_matmul [TESSEL [WORKDIR]]
 *
 * TESSEL is the tessel binary (default: "tessel" on PATH); WORKDIR is where the tuning log, the
 * pack and the compiled kernels go (default: a new folder under /tmp). Exits 0 when both launches
 * match the reference. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessel/runtime.h"

#define M 64
#define N 48
#define K 32
static const char kWorkload[] = "matmul(M=64, N=48, K=32)";

static int Run(const char* command) {
  printf("$ %s\n", command);
  fflush(stdout);
  int rc = system(command);
  if (rc != 0) fprintf(stderr, "deploy_matmul: the command failed (status %d)\n", rc);
  return rc;
}

/* Opens `path`, finds the matmul's kernel for the host, launches it on a, b and c. */
static int LaunchFrom(const char* path, const char* cache_dir, const float* a, const float* b,
                      float* c) {
  tessel_open_options options = {cache_dir, 0};
  tessel_db* db = NULL;
  tessel_kernel* kernel = NULL;
  tessel_status s = tessel_open(path, &options, &db);
  if (s == TESSEL_OK) s = tessel_find(db, kWorkload, TESSEL_TARGET_HOST, &kernel);
  if (s == TESSEL_OK) {
    printf("%s: record %s (%.4f ms when tuned), match: %s%s\n", path,
           tessel_kernel_record_uid(kernel), tessel_kernel_median_ms(kernel),
           tessel_kernel_match_description(kernel),
           tessel_kernel_regenerated(kernel) ? ", source regenerated" : ", source as measured");
    const int64_t a_shape[2] = {M, K}, b_shape[2] = {K, N}, c_shape[2] = {M, N};
    const tessel_tensor args[3] = {{(void*)a, "f32", 2, a_shape},
                                   {(void*)b, "f32", 2, b_shape},
                                   {c, "f32", 2, c_shape}};
    s = tessel_launch(kernel, args, 3, NULL);
  }
  if (s != TESSEL_OK) {
    fprintf(stderr, "deploy_matmul: %s: %s\n", tessel_status_name(s), tessel_last_error());
  }
  tessel_kernel_release(kernel);
  tessel_close(db);
  return s == TESSEL_OK ? 0 : 1;
}

/* The largest relative error of c against a double-precision reference. */
static double MaxError(const float* a, const float* b, const float* c) {
  double worst = 0;
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double want = 0;
      for (int k = 0; k < K; ++k) want += (double)a[i * K + k] * (double)b[k * N + j];
      const double err = fabs(c[i * N + j] - want) / fmax(1.0, fabs(want));
      if (!(err <= worst)) worst = err; /* NaN included */
    }
  }
  return worst;
}

int main(int argc, char** argv) {
  const char* tessel = argc > 1 ? argv[1] : "tessel";
  char dir[4096];
  if (argc > 2) {
    snprintf(dir, sizeof(dir), "%s", argv[2]);
  } else {
    char tmpl[] = "/tmp/tessel_deploy_XXXXXX";
    if (mkdtemp(tmpl) == NULL) return 1;
    snprintf(dir, sizeof(dir), "%s", tmpl);
  }
  char log[4200], pack[4200], cache[4200], command[16384];
  snprintf(log, sizeof(log), "%s/tuning.db", dir);
  snprintf(pack, sizeof(pack), "%s/kernels.pack", dir);
  snprintf(cache, sizeof(cache), "%s/cache", dir);

  /* 1. Tune on the host, then pack the winner. */
  snprintf(command, sizeof(command), "'%s' tune -w '%s' -n 8 --target host --db '%s' --quiet",
           tessel, kWorkload, log);
  if (Run(command) != 0) return 1;
  snprintf(command, sizeof(command), "'%s' pack --db '%s' -w '%s' --out '%s'", tessel, log,
           kWorkload, pack);
  if (Run(command) != 0) return 1;

  /* 2. Our own buffers. */
  static float a[M * K], b[K * N], c[M * N];
  srand(7);
  for (int i = 0; i < M * K; ++i) a[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int i = 0; i < K * N; ++i) b[i] = (float)rand() / RAND_MAX - 0.5f;

  /* 3. Launch the best kernel from the log, then from the pack, and check each. */
  const char* sources[2] = {log, pack};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < M * N; ++j) c[j] = NAN;
    if (LaunchFrom(sources[i], cache, a, b, c) != 0) return 1;
    const double err = MaxError(a, b, c);
    printf("%s: max relative error %.2e against the reference\n", sources[i], err);
    if (!(err < 1e-4)) {
      fprintf(stderr, "deploy_matmul: the kernel from %s does not match the reference\n",
              sources[i]);
      return 1;
    }
  }
  printf("ok\n");
  return 0;
}
