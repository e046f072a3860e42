// emu/engine/task.h: the coroutine type every virtual-CPU program is written in.
//
// Task<T> is a lazily started C++20 coroutine. A parent runs a child with
// `T v = co_await Child(...)`; control passes by symmetric transfer (no stack
// growth) and returns to the parent when the child finishes. Model code that
// may wait on a shared resource (a lock, the SMMU command queue word, a device
// queue) is a Task; code that only charges private CPU time is a plain
// function.
//
// A Task without a frame is already complete: awaiting it does nothing but
// hand back its value. A function with nothing to wait for returns one
// (`return {};` for Task<void>, `return value;` for Task<T>), and a function
// whose only work is to await another Task returns that Task, so neither
// starts a coroutine of its own. A function that waits only sometimes (a lock
// that is contended, a magazine that is empty) does its work as plain code
// while nothing waits and hands the rest to a coroutine when something does;
// its caller can test ready() and go on without a coroutine either.
//
// Frames are recycled through FramePool, a per-thread size-class free list, so
// a simulated map/unmap pair performs no heap allocation once warm.
//
// Thread-safety: a Task and its frames belong to the thread that runs the
// engine; the pool is thread_local. Ownership: a Task owns its coroutine frame
// and destroys it in its destructor; destroying a suspended parent destroys
// the child it is awaiting. Exceptions are not used: an exception escaping a
// coroutine terminates the process (model code reports errors by value).
#ifndef EMU_ENGINE_TASK_H_
#define EMU_ENGINE_TASK_H_

#include <coroutine>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>

namespace farm::emu {

//! Per-thread free lists of coroutine frames, in 64-byte size classes.
class FramePool {
 public:
  static void* Allocate(std::size_t n) {
    std::size_t cls = (n + kGranule - 1) / kGranule;
    if (cls >= kClasses) return ::operator new(n);
    Lists& l = lists();
    if (FreeNode* f = l.head[cls]) {
      l.head[cls] = f->next;
      return f;
    }
    return ::operator new(cls* kGranule);
  }
  static void Deallocate(void* p, std::size_t n) {
    std::size_t cls = (n + kGranule - 1) / kGranule;
    if (cls >= kClasses) {
      ::operator delete(p);
      return;
    }
    Lists& l = lists();
    auto* f = static_cast<FreeNode*>(p);
    f->next = l.head[cls];
    l.head[cls] = f;
  }

 private:
  static constexpr std::size_t kGranule = 64;
  static constexpr std::size_t kClasses = 64;  // frames up to 4 KiB are pooled
  struct FreeNode {
    FreeNode* next;
  };
  struct Lists {
    FreeNode* head[kClasses] = {};
    ~Lists() {
      for (FreeNode*& h : head) {
        while (h) {
          FreeNode* n = h->next;
          ::operator delete(h);
          h = n;
        }
      }
    }
  };
  static Lists& lists() {
    thread_local Lists l;
    return l;
  }
};

namespace internal {

struct PromiseBase {
  std::coroutine_handle<> continuation = std::noop_coroutine();

  static void* operator new(std::size_t n) { return FramePool::Allocate(n); }
  static void operator delete(void* p, std::size_t n) { FramePool::Deallocate(p, n); }

  std::suspend_always initial_suspend() noexcept { return {}; }
  struct FinalAwaiter {
    bool await_ready() noexcept { return false; }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      return h.promise().continuation;
    }
    void await_resume() noexcept {}
  };
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { std::terminate(); }
};

}  // namespace internal

template <typename T = void>
class Task;

namespace internal {

// The promise of Task<T>: the value slot and return_value, or return_void.
template <typename T>
struct TaskPromise : PromiseBase {
  T value{};
  Task<T> get_return_object();
  void return_value(T v) { value = std::move(v); }
};
template <>
struct TaskPromise<void> : PromiseBase {
  Task<void> get_return_object();
  void return_void() {}
};

}  // namespace internal

template <typename T>
class [[nodiscard]] Task {
 public:
  using promise_type = internal::TaskPromise<T>;

  Task() = default;
  explicit Task(std::coroutine_handle<promise_type> h) : h_(h) {}
  //! A complete Task holding `v` (non-void T only).
  template <typename U = T>
  requires(!std::is_void_v<U>) Task(std::type_identity_t<U> v)
      : value_(std::move(v)) {}  // NOLINT: implicit: `return v;`
  Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})), value_(std::move(o.value_)) {}
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, {});
      value_ = std::move(o.value_);
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (h_) h_.destroy();
  }

  bool await_ready() const noexcept { return !h_; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> cont) noexcept {
    h_.promise().continuation = cont;
    return h_;
  }
  T await_resume() {
    if constexpr (!std::is_void_v<T>) return h_ ? std::move(h_.promise().value) : std::move(value_);
  }

  std::coroutine_handle<promise_type> handle() const { return h_; }
  bool done() const { return !h_ || h_.done(); }
  //! Complete without a coroutine: awaiting it would not suspend.
  bool ready() const { return !h_; }
  //! The value of a ready() Task.
  template <typename U = T>
  requires(!std::is_void_v<U>) const U& value() const { return value_; }

 private:
  // An empty stand-in for Task<void>'s value.
  struct NoValue {};
  std::coroutine_handle<promise_type> h_;
  [[no_unique_address]] std::conditional_t<std::is_void_v<T>, NoValue, T> value_{};
};

namespace internal {

template <typename T>
Task<T> TaskPromise<T>::get_return_object() {
  return Task<T>(std::coroutine_handle<TaskPromise>::from_promise(*this));
}
inline Task<void> TaskPromise<void>::get_return_object() {
  return Task<void>(std::coroutine_handle<TaskPromise>::from_promise(*this));
}

}  // namespace internal

}  // namespace farm::emu

#endif  // EMU_ENGINE_TASK_H_
