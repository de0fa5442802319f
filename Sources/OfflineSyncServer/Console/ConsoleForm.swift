import Foundation

/// The console's sign-in form as a browser posts it (`application/x-www-form-urlencoded`).
package enum ConsoleForm {
    /// The first `key` field of `form` that decodes (`+` is a space, then `%XX` escapes);
    /// `nil` when there is none.
    package static func key(in form: String) -> String? {
        form.split(separator: "&").compactMap { pair -> String? in
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0] == "key" else { return nil }
            return String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
        }.first
    }
}
