import Testing
@testable import WebText

@Suite struct HTMLTextTests {
    @Test func referencesAreDecodedOnceInOnePass() {
        // "&amp;lt;" is the text "&lt;": decoding &amp; first would have made it "<".
        #expect(HTMLText.plain("AT&amp;T &amp;lt;b&amp;gt;") == "AT&T &lt;b&gt;")
        #expect(HTMLText.plain("&lt;script&gt;") == "<script>")
        #expect(HTMLText.plain("&quot;Zoë&quot; &apos;x&#39; &#233;&#xE9;&#XE9;") == "\"Zoë\" 'x' ééé")
        #expect(HTMLText.plain("&copy; OpenStreetMap&nbsp;contributors") == "© OpenStreetMap contributors")
    }

    @Test func unknownOrBrokenReferencesStayAsWritten() {
        #expect(HTMLText.plain("Tom & Jerry") == "Tom & Jerry")
        #expect(HTMLText.plain("&bogus; &#0; &#xZZ; &#1114112; &amp") == "&bogus; &#0; &#xZZ; &#1114112; &amp")
        #expect(HTMLText.plain("&averyveryverylongname;") == "&averyveryverylongname;")
    }

    @Test func tagsGoAndWhiteSpaceCloses() {
        #expect(HTMLText.plain("  <a href=\"https://x.example\">Jane</a>\n\t<b>Doe</b>  ") == "Jane Doe")
        #expect(HTMLText.plain("<span>a</span><span>b</span>") == "ab")
        #expect(HTMLText.plain("line\u{1}one\r\ntwo") == "line one two")
        #expect(HTMLText.plain("") == "" && HTMLText.plain("<br/>") == "")
    }
}

@Suite struct HTMLEscapingTests {
    @Test func theFiveSpecialCharactersAndNothingElse() {
        #expect(HTMLEscaping.escape(#"<a href="x">Tom & 'Jerry'</a>"#) == "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;")
        #expect(HTMLEscaping.escape("Zoë – 東京 😀") == "Zoë – 東京 😀")
        #expect(HTMLEscaping.escape(HTMLText.plain("&amp;lt;")) == "&amp;lt;")
    }
}
