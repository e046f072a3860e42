// metrics_flags.h: the command-line flags every farm binary shares for its
// /metrics endpoint's TLS (--metrics-tls-cert, --metrics-tls-key, with
// FARM_METRICS_TLS_* environment fallbacks).
//
// Call from main before parsing; `out` must outlive the parse. Not
// thread-safe (CLI11 apps are built on one thread).
#ifndef LIB_METRICS_METRICS_FLAGS_H_
#define LIB_METRICS_METRICS_FLAGS_H_

#include <CLI/CLI.hpp>

#include "lib/metrics/metrics.h"

namespace farm::metrics {

inline void AddMetricsTlsOptions(CLI::App& app, MetricsTls* out) {
  app.add_option("--metrics-tls-cert", out->cert_file,
                 "serve /metrics over HTTPS with this PEM certificate chain (with "
                 "--metrics-tls-key)")
      ->envname("FARM_METRICS_TLS_CERT")
      ->check(CLI::ExistingFile);
  app.add_option("--metrics-tls-key", out->key_file, "the PEM private key of --metrics-tls-cert")
      ->envname("FARM_METRICS_TLS_KEY")
      ->check(CLI::ExistingFile);
}

}  // namespace farm::metrics

#endif  // LIB_METRICS_METRICS_FLAGS_H_
