// sha256: the hex SHA-256 of a byte string (OpenSSL), for the names the farm
// derives from content: a kernel config's hash, a build directory's key, a
// try job's patch, an API token's stored form.
//
// Pure function; thread-safe.
#ifndef LIB_BASE_SHA256_H_
#define LIB_BASE_SHA256_H_

#include <string>
#include <string_view>

namespace farm::base {

// 64 lower-case hex digits.
std::string Sha256Hex(std::string_view data);

}  // namespace farm::base

#endif  // LIB_BASE_SHA256_H_
