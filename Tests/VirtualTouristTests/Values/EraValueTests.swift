import Foundation
import HTTPClient
import Testing
@testable import AlbumWing
@testable import Domain

/// Eras as a form names them, and dates as providers write them, read without made-up precision.
@Suite struct EraValueTests {
    @Test func formValuesReadIntoTheirRanges() throws {
        /// The era read, or "refused".
        func parse(_ when: String?, _ from: String? = nil, _ to: String? = nil) -> String {
            switch Era.parse(when: when, from: from, to: to, thisYear: 2026) {
            case .success(let era): return era.map { "\($0.from)-\($0.to)" } ?? "any"
            case .failure: return "refused"
            }
        }
        #expect(parse("any") == "any" && parse(nil) == "any" && parse("") == "any")
        #expect(parse("1950s") == "1950-1959")
        #expect(parse(" 1850S ") == "1850-1859")
        #expect(parse("2020s") == "2020-2029", "a decade is its ten years, this one too")
        #expect(parse("years", "2020", "2027") == "refused", "a range past this year")
        #expect(Era(from: 2020, to: 2029, thisYear: 2027)?.isDecade == true, "an album of the 2020s stays one after New Year")
        #expect(parse("years", "1950", "1965") == "1950-1965")
        #expect(parse("1950-1965") == "1950-1965")
        #expect(parse("years", "1962", "1962") == "1962-1962")
        for bad: (String, String?, String?) in [("1840s", nil, nil), ("1955s", nil, nil), ("2030s", nil, nil), ("years", "1990", "1950"),
                                                 ("years", "1950", nil), ("years", "١٩٥٠", "1960"), ("years", "+1950", "1960"),
                                                 ("99999999999999999999s", nil, nil), ("-1950s", nil, nil), ("1950-", nil, nil),
                                                 ("years", "1950.5", "1960"), ("<b>", nil, nil), ("years", "0x7b2", "1960")] {
            #expect(parse(bad.0, bad.1, bad.2) == "refused", "\(bad)")
        }
    }

    @Test func erasSayThemselvesAndReadBack() throws {
        let fifties = try #require(Era.decade(1950, thisYear: 2026))
        #expect(fifties.description == "the 1950s" && fifties.formValue == "1950s")
        let range = try #require(Era(from: 1950, to: 1965, thisYear: 2026))
        #expect(range.description == "1950–1965" && range.formValue == "1950-1965")
        #expect(Era(from: 1962, to: 1962, thisYear: 2026)?.description == "1962")
        for era in Era.decades(thisYear: 2026) + [range] {
            #expect(try Era.parse(when: era.formValue, thisYear: 2026).get() == era)
        }
        #expect(Era.decades(thisYear: 2026).count == 18 && Era.decades(thisYear: 2026).first?.from == 1850)
    }

    @Test func commonsDatesKeepTheirPrecision() {
        let cases: [(String, String, ClosedRange<Int>?)] = [
            ("2012-05-03 14:22:10", "2012-05-03 14:22:10", 2012...2012),
            ("2012-05-03", "2012-05-03", 2012...2012),
            ("1975-05", "May 1975", 1975...1975),
            ("1962", "1962", 1962...1962),
            ("1920s", "1920s", 1920...1929),
            ("circa 1930", "circa 1930", 1930...1930),
            ("c. 1900", "circa 1900", 1900...1900),
            ("ca. 1890s", "circa 1890s", nil),
            ("between 1950 and 1955", "1950–1955", 1950...1955),
            ("1950–1955", "1950–1955", 1950...1955),
            ("1975-13", "1975-13", nil),
            ("1925s", "1925s", nil),
            ("taken during a summer", "taken during a summer", nil),
            ("1960 and 1950", "1960 and 1950", nil),
            ("19 July 2014", "19 July 2014", 2014...2014),
            ("July 2014", "July 2014", 2014...2014),
            ("July 19, 2014", "July 19, 2014", 2014...2014),
            ("14:22, 3 May 2012", "14:22, 3 May 2012", 2012...2012),
            ("3 Maybe 2012", "3 Maybe 2012", nil),
            ("summer 2012", "summer 2012", nil),
        ]
        for (text, label, years) in cases {
            let date = TakenDate.commons(text)
            #expect(date.label == label && date.years == years, "\(text) → \(date)")
        }
    }

    @Test func aPhotoBelongsToAnEraOnlyWhollyInsideIt() {
        let fifties = Era.decade(1950, thisYear: 2026)
        #expect(TakenDate.belongs(1953...1953, in: fifties))
        #expect(TakenDate.belongs(1950...1959, in: fifties))
        #expect(!TakenDate.belongs(1948...1952, in: fifties), "may be from the 1940s")
        #expect(!TakenDate.belongs(nil, in: fifties), "unknown dates are never in an era")
        #expect(TakenDate.belongs(nil, in: nil), "any time takes every photo")
    }

    @Test func flickrIsAskedForTheEraAndItsUnknownDatesAreNotTrusted() {
        let flickr = FlickrProvider(apiKey: "k", client: HTTPClient())
        let asked = Dictionary(uniqueKeysWithValues: flickr.searchParameters(lat: 1, lon: 2, page: 1, era: Era.decade(1950, thisYear: 2026)))
        #expect(asked["min_taken_date"] == "1950-01-01 00:00:00" && asked["max_taken_date"] == "1959-12-31 23:59:59")
        #expect(asked["min_upload_date"] != nil, "the limiting agent stays")
        let plain = Dictionary(uniqueKeysWithValues: flickr.searchParameters(lat: 1, lon: 2, page: 1))
        #expect(plain["min_taken_date"] == nil && plain["max_taken_date"] == nil)
        #expect(FlickrCredits.takenYears("1962-01-01 00:00:00", unknown: "0") == 1962...1962)
        #expect(FlickrCredits.takenYears("2015-06-01 10:00:00", unknown: "1") == nil, "the upload time in the date's place")
        #expect(FlickrCredits.takenYears("abcd", unknown: nil) == nil && FlickrCredits.takenYears("0999-01-01", unknown: nil) == nil)
    }

    @Test func photosOrderByWhenTheyWereTakenUnknownLast() {
        let labels: [String?] = ["2019-01-11 12:00:00", nil, "May 1975", "circa 1920s", "1962", "2019-01-02 08:00:00", "March 1975",
                                 "taken one summer", "1920s", "circa 1961"]
        let ordered = labels.enumerated().sorted {
            let a = TakenDate.sortKey($0.element), b = TakenDate.sortKey($1.element)
            return a != b ? a < b : $0.offset < $1.offset
        }.map(\.element)
        #expect(ordered == ["1920s", "circa 1920s", "circa 1961", "1962", "March 1975", "May 1975", "2019-01-02 08:00:00",
                            "2019-01-11 12:00:00", nil, "taken one summer"], "undated last, in the album's order")
    }
}
