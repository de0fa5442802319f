/// The console's throughput and error figures, summed from the server's own Prometheus
/// exposition: the numbers `/metrics` serves, never a second count that could disagree.
package enum MetricTotals {
    /// One figure: what it counts and its total.
    package struct Line: Equatable {
        package var label: String
        package var value: Double
    }

    /// The counters shown, in order: the metric, the label its samples are split by (`nil`:
    /// summed over every label), and how the console names it.
    static let shown: [(metric: String, by: String?, name: String)] = [
        ("offline_sync_http_requests_total", "status", "HTTP requests"),
        ("offline_sync_push_batches_total", nil, "pushes applied"),
        ("offline_sync_push_operations_total", "outcome", "pushed operations"),
        ("offline_sync_rule_refusals_total", nil, "rule refusals (403)"),
        ("offline_sync_pull_pages_total", nil, "pull pages"),
        ("offline_sync_pull_rows_total", "kind", "pulled rows"),
        ("offline_sync_notices_sent_total", nil, "change notices sent"),
        ("offline_sync_token_verifications_total", "result", "token checks"),
        ("offline_sync_attachment_bytes_total", "direction", "attachment bytes"),
        ("offline_sync_console_signin_refused_total", "reason", "console sign-ins refused"),
    ]

    /// The figures of `exposition` (Prometheus text format 0.0.4), in ``shown``'s order and,
    /// within a metric, by label value. An HTTP status is shown by its class (2xx, 4xx, 5xx).
    package static func lines(_ exposition: [UInt8]) -> [Line] {
        let samples = parse(String(decoding: exposition, as: UTF8.self))
        return shown.flatMap { metric, by, name -> [Line] in
            var totals: [String: Double] = [:]
            for sample in samples where sample.name == metric {
                var label = name
                if let by, let value = sample.labels[by] {
                    label += ": " + (by == "status" ? String(value.prefix(1)) + "xx" : value)
                }
                totals[label, default: 0] += sample.value
            }
            return totals.keys.sorted().map { Line(label: $0, value: totals[$0]!) }
        }
    }

    /// The samples of an exposition: name, labels, value (comments and malformed lines left out).
    package static func parse(_ text: String) -> [(name: String, labels: [String: String], value: Double)] {
        text.split(separator: "\n").compactMap { line in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "),
                  let value = Double(line[line.index(after: space)...]) else { return nil }
            let series = line[..<space]
            guard let brace = series.firstIndex(of: "{") else { return (String(series), [:], value) }
            guard let labels = labels(series[series.index(after: brace)...]) else { return nil }
            return (String(series[..<brace]), labels, value)
        }
    }

    /// `name="value",…}` with the format's escapes in values (`\\`, `\"`, `\n`); `nil` when malformed.
    private static func labels(_ text: Substring) -> [String: String]? {
        var labels: [String: String] = [:]
        var rest = text[...]
        while let first = rest.first, first != "}" {
            if first == "," { rest = rest.dropFirst(); continue }
            guard let equals = rest.firstIndex(of: "="), rest[rest.index(after: equals)...].first == "\"" else { return nil }
            let name = String(rest[..<equals])
            var value = "", escaped = false
            var index = rest.index(equals, offsetBy: 2)
            while index < rest.endIndex {
                let character = rest[index]
                if escaped {
                    value.append(character == "n" ? "\n" : character)
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    break
                } else {
                    value.append(character)
                }
                index = rest.index(after: index)
            }
            guard index < rest.endIndex else { return nil }
            labels[name] = value
            rest = rest[rest.index(after: index)...]
        }
        return labels
    }
}
