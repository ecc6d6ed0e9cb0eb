import Hummingbird
import Mustache
import PostgresNIO
print("stub")
