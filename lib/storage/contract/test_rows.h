// lib/storage/contract/test_rows.h: the rows the storage tests write, built
// one way for the repository contract suite and the PostgreSQL-only tests.
// Header-only, tests only. Thread-safety: pure functions.
#ifndef LIB_STORAGE_CONTRACT_TEST_ROWS_H_
#define LIB_STORAGE_CONTRACT_TEST_ROWS_H_

#include <string>

#include "iommufarm/v1/farm.pb.h"
#include "lib/storage/matrix_store.h"

namespace farm::storage::testrows {

// A matrix of `n` strict dma-map-bench jobs on catalog "c", commits c0..c{n-1}.
inline NewMatrix Matrix(int n, int max_attempts, int prio, iommufarm::v1::Executor executor,
                        iommufarm::v1::JobKind kind) {
  NewMatrix m;
  m.matrix.set_name("m");
  m.matrix.set_spec_yaml("name: m");
  m.matrix.set_catalog("c");
  m.matrix.set_executor(executor);
  for (int i = 0; i < n; ++i) {
    iommufarm::v1::Job j;
    j.set_catalog("c");
    j.set_commit_id("c" + std::to_string(i));
    j.set_commit_index(i);
    j.set_platform("p");
    j.mutable_workload()->set_name("dma-map-bench");
    (*j.mutable_workload()->mutable_params())["tests"] = "write,read";
    j.set_mode(iommufarm::v1::IOMMU_MODE_STRICT);
    j.set_executor(executor);
    j.set_priority(prio);
    j.set_kind(kind);
    j.set_max_attempts(max_attempts);
    j.set_seed(0xfedcba9876543210ULL + i);
    m.jobs.push_back(j);
  }
  return m;
}

// An agent registration with one capability and four slots, of platform
// "p": Matrix's jobs' platform (proto/labels.h).
inline iommufarm::v1::RegisterRequest Registration(const std::string& name,
                                                   const std::string& capability) {
  iommufarm::v1::RegisterRequest r;
  r.set_name(name);
  r.add_capabilities()->set_name(capability);
  r.set_slots(4);
  r.mutable_host()->set_hostname("h-" + name);
  (*r.mutable_host()->mutable_labels())["platform"] = "p";
  return r;
}

// A fio agent whose host runs `release` in strict mode, with one offer of
// it from `provider` ("": none, the host kernel itself) for `machine_model`.
inline iommufarm::v1::RegisterRequest StrictHost(const std::string& name,
                                                 const std::string& release,
                                                 const std::string& provider,
                                                 const std::string& machine_model = "") {
  iommufarm::v1::RegisterRequest r = Registration(name, "fio");
  r.mutable_host()->set_kernel_release(release);
  r.mutable_host()->set_iommu_mode(iommufarm::v1::IOMMU_MODE_STRICT);
  if (!provider.empty()) {
    iommufarm::v1::KernelOffer* o = r.mutable_capabilities(0)->add_kernels();
    o->set_provider(provider);
    o->set_release(release);
    o->set_machine_model(machine_model);
    o->add_modes(iommufarm::v1::IOMMU_MODE_STRICT);
  }
  return r;
}

}  // namespace farm::storage::testrows

#endif  // LIB_STORAGE_CONTRACT_TEST_ROWS_H_
