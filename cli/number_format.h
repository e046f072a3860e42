// farm::cli number formatting: how farmctl writes a measured number, in one
// place, so its tables, CSV, JSON and HTML reports never disagree about a
// figure.
//
// Two forms, for two readers:
//   FormatNumber       a person's: four significant digits in every size,
//                      "29.67", "2112", then with an SI prefix from 10,000
//                      up ("20.01k", "793.7k", "1.745M", "4.097G", "1.2T"),
//                      as fio prints its rates; no exponent short of 1e15
//                      and 1e-3; "-" for NaN (no value), "inf"/"-inf" for
//                      infinities.
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
