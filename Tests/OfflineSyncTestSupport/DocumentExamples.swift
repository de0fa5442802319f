import Foundation

/// A document's example that must be a source file of the tests, byte for byte: the block
/// between `<!-- example: PATH -->` + a `swift` fence and the fence + `<!-- example end -->`.
package struct DocumentExample {
    /// What the document shows.
    package let shown: String
    /// The file, as it is.
    package let source: String

    /// Reads `document` and the example naming `path` (both relative to the package root).
    /// Throws when the document has no such example.
    package init(in document: String, showing path: String) throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardized
        source = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        let text = try String(contentsOf: root.appendingPathComponent(document), encoding: .utf8)
        let begin = "<!-- example: \(path) -->\n```swift\n", end = "```\n<!-- example end -->"
        guard let start = text.range(of: begin), let stop = text.range(of: end, range: start.upperBound..<text.endIndex) else {
            throw CocoaError(.fileReadCorruptFile, userInfo: [NSLocalizedDescriptionKey: "\(document) has no example of \(path)"])
        }
        shown = String(text[start.upperBound..<stop.lowerBound])
    }
}
