// farm::cli number formatting: how farmctl writes a measured number, in one
// place, so its tables, CSV, JSON and HTML reports never disagree about a
// figure.
//
// Two forms, for two readers:
//   FormatNumber       a person's: four significant digits, whole numbers
//                      from 1,000 up (no exponent for counts and IOPS), an
//                      exponent only for the very large or very small; "-"
//                      for NaN (no value), "inf"/"-inf" for infinities.
//   FormatExactNumber  a program's (CSV, machine columns): shortest text
//                      that reads back as the same double ("%.17g").
//
// Thread-safety: pure functions, reentrant.
#ifndef CLI_NUMBER_FORMAT_H_
#define CLI_NUMBER_FORMAT_H_

#include <string>

namespace farm::cli {

std::string FormatNumber(double v);
std::string FormatExactNumber(double v);

}  // namespace farm::cli

#endif  // CLI_NUMBER_FORMAT_H_
