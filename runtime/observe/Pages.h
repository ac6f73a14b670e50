//===- Pages.h - self-contained HTML pages -----------------------*- C++ -*-===//
//
// The memory page (zcc --emit=memory-html, zrun --memory-page), the
// training dashboard (zrun --dashboard) and the timeline of a trace (zrun
// trace-page) are one HTML file each: their data
// as JSON in a <script type="application/json">, the drawing code and
// Chart.js (Debian's libjs-chart.js, compiled in) inlined, so that the file
// opens anywhere with no network. A script error shows on the page and
// sets <body data-error>; a page that drew everything sets
// <body data-drawn="yes"> (what tools/check-pages.sh waits for).
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_OBSERVE_PAGES_H
#define ZRT_OBSERVE_PAGES_H

#include <string>

namespace zrt {

enum class PageKind { Memory, Dashboard, Trace };

/// The page of |kind| titled |title| over |dataJson|; with |refreshSeconds|
/// > 0 the browser reloads it that often (a dashboard while the run goes on).
std::string renderPage(PageKind kind, const std::string &title, const std::string &dataJson,
                       int refreshSeconds = 0);

/// Chart.js's minified source (ChartJs.cpp, generated at configure time).
extern const char *const kChartJs;

} // namespace zrt

#endif // ZRT_OBSERVE_PAGES_H
