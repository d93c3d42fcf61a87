// The Java reference catalog of bench/reference_compare.py: Apache Iceberg's own REST handlers
// (org.apache.iceberg.rest.CatalogHandlers) over Iceberg's JdbcCatalog on PostgreSQL, served by
// the JDK's built-in HTTP server with a fixed thread pool and a local-disk warehouse written
// without fsync. Everything a request does past the routing below is Iceberg's code, from the
// iceberg-spark-runtime jar the test dependencies ship.
//
// Compile and run (bench/reference_compare.py does both on demand):
//   javac -cp RUNTIME.jar:/usr/share/java/postgresql.jar:/usr/share/java/slf4j-api.jar \
//         -d bench/reference/build bench/reference/ReferenceCatalogServer.java
//   java -cp bench/reference/build:RUNTIME.jar:/usr/share/java/postgresql.jar:\
//         /usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar \
//         ReferenceCatalogServer PORT JDBC_URL JDBC_USER WAREHOUSE_DIR [THREADS] [POOL]
//
// Routes (the REST spec's, without a prefix): GET /v1/config; GET|POST /v1/namespaces;
// GET|HEAD|DELETE /v1/namespaces/{ns}; POST /v1/namespaces/{ns}/properties;
// GET|POST /v1/namespaces/{ns}/tables; GET|HEAD|POST|DELETE /v1/namespaces/{ns}/tables/{t};
// POST /v1/namespaces/{ns}/tables/{t}/metrics; POST /v1/tables/rename.

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.Files;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.exceptions.AlreadyExistsException;
import org.apache.iceberg.exceptions.CommitFailedException;
import org.apache.iceberg.exceptions.NamespaceNotEmptyException;
import org.apache.iceberg.exceptions.NoSuchNamespaceException;
import org.apache.iceberg.exceptions.NoSuchTableException;
import org.apache.iceberg.exceptions.NotFoundException;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.InputFile;
import org.apache.iceberg.io.OutputFile;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.rest.CatalogHandlers;
import org.apache.iceberg.rest.Endpoint;
import org.apache.iceberg.rest.RESTSerializers;
import org.apache.iceberg.rest.RESTUtil;
import org.apache.iceberg.rest.requests.CreateNamespaceRequest;
import org.apache.iceberg.rest.requests.CreateTableRequest;
import org.apache.iceberg.rest.requests.RenameTableRequest;
import org.apache.iceberg.rest.requests.UpdateNamespacePropertiesRequest;
import org.apache.iceberg.rest.requests.UpdateTableRequest;
import org.apache.iceberg.rest.responses.ConfigResponse;
import org.apache.iceberg.rest.responses.ErrorResponse;
import org.apache.iceberg.rest.responses.ErrorResponseParser;
import org.apache.iceberg.shaded.com.fasterxml.jackson.annotation.JsonAutoDetect;
import org.apache.iceberg.shaded.com.fasterxml.jackson.annotation.PropertyAccessor;
import org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonProcessingException;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.DeserializationFeature;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.PropertyNamingStrategies;

public final class ReferenceCatalogServer {

  /** Files on the local disk, written without fsync (as Iceberg's local files are). */
  public static final class LocalFileIO implements FileIO {
    private static final long serialVersionUID = 1L;

    private static String path(String location) {
      return location.startsWith("file:") ? URI.create(location).getPath() : location;
    }

    @Override
    public InputFile newInputFile(String location) {
      return Files.localInput(path(location));
    }

    @Override
    public OutputFile newOutputFile(String location) {
      return Files.localOutput(path(location));
    }

    @Override
    public void deleteFile(String location) {
      new File(path(location)).delete();
    }
  }

  /** A request that does not match a route or a method. */
  static final class NoRoute extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final int status;

    NoRoute(int status, String message) {
      super(message);
      this.status = status;
    }
  }

  private static final List<Endpoint> ENDPOINTS =
      List.of(
          Endpoint.V1_LIST_NAMESPACES, Endpoint.V1_LOAD_NAMESPACE, Endpoint.V1_NAMESPACE_EXISTS,
          Endpoint.V1_CREATE_NAMESPACE, Endpoint.V1_UPDATE_NAMESPACE, Endpoint.V1_DELETE_NAMESPACE,
          Endpoint.V1_LIST_TABLES, Endpoint.V1_LOAD_TABLE, Endpoint.V1_TABLE_EXISTS,
          Endpoint.V1_CREATE_TABLE, Endpoint.V1_UPDATE_TABLE, Endpoint.V1_DELETE_TABLE,
          Endpoint.V1_RENAME_TABLE, Endpoint.V1_REPORT_METRICS);

  private final JdbcCatalog catalog;
  private final ObjectMapper json;

  ReferenceCatalogServer(JdbcCatalog catalog) {
    this.catalog = catalog;
    // The REST models' Jackson settings: fields, kebab-case names, Iceberg's own serializers.
    this.json = new ObjectMapper();
    json.setVisibility(PropertyAccessor.FIELD, JsonAutoDetect.Visibility.ANY);
    json.configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
    json.setPropertyNamingStrategy(new PropertyNamingStrategies.KebabCaseStrategy());
    RESTSerializers.registerAll(json);
  }

  public static void main(String[] args) throws IOException {
    if (args.length < 4) {
      System.err.println("usage: PORT JDBC_URL JDBC_USER WAREHOUSE_DIR [THREADS] [POOL]");
      System.exit(2);
    }
    int port = Integer.parseInt(args[0]);
    int threads = args.length > 4 ? Integer.parseInt(args[4]) : 16;
    String pool = args.length > 5 ? args[5] : String.valueOf(threads);
    Map<String, String> props = new HashMap<>();
    props.put(CatalogProperties.URI, args[1]);
    props.put("jdbc.user", args[2]);
    props.put(CatalogProperties.WAREHOUSE_LOCATION, new File(args[3]).getAbsolutePath());
    props.put(CatalogProperties.CLIENT_POOL_SIZE, pool);
    props.put("jdbc.init-catalog-tables", "true");
    JdbcCatalog catalog = new JdbcCatalog(p -> new LocalFileIO(), null, true);
    catalog.initialize("reference", props);

    ReferenceCatalogServer handler = new ReferenceCatalogServer(catalog);
    HttpServer server =
        HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 1024);
    server.createContext("/", handler::handle);
    server.setExecutor(Executors.newFixedThreadPool(threads));
    server.start();
    System.out.println("ready on " + port + " with " + threads + " threads, pool " + pool);
    System.out.flush();
  }

  void handle(HttpExchange exchange) throws IOException {
    int status;
    byte[] body;
    try {
      byte[] request = exchange.getRequestBody().readAllBytes();
      Object answer = route(exchange.getRequestMethod(), exchange.getRequestURI(), request);
      status = answer == null ? 204 : 200;
      body = answer == null ? new byte[0] : json.writeValueAsBytes(answer);
    } catch (RuntimeException e) {
      status = statusOf(e);
      ErrorResponse error =
          ErrorResponse.builder()
              .responseCode(status)
              .withType(e instanceof NoRoute ? "NoSuchRouteException" : e.getClass().getSimpleName())
              .withMessage(String.valueOf(e.getMessage()))
              .build();
      body = ErrorResponseParser.toJson(error).getBytes(StandardCharsets.UTF_8);
      if (status >= 500) {
        e.printStackTrace();
      }
    }
    boolean head = "HEAD".equals(exchange.getRequestMethod());
    if (body.length > 0 && !head) {
      exchange.getResponseHeaders().set("Content-Type", "application/json");
    }
    exchange.sendResponseHeaders(status, body.length == 0 || head ? -1 : body.length);
    if (body.length > 0 && !head) {
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(body);
      }
    }
    exchange.close();
  }

  private static int statusOf(RuntimeException e) {
    if (e instanceof NoRoute) {
      return ((NoRoute) e).status;
    }
    if (e instanceof NoSuchNamespaceException
        || e instanceof NoSuchTableException
        || e instanceof NotFoundException) {
      return 404;
    }
    if (e instanceof AlreadyExistsException
        || e instanceof CommitFailedException
        || e instanceof NamespaceNotEmptyException) {
      return 409;
    }
    if (e instanceof IllegalArgumentException
        || e instanceof ValidationException
        || e instanceof UncheckedIOException) {
      return 400;
    }
    if (e instanceof UnsupportedOperationException) {
      return 406;
    }
    return 500; // CommitStateUnknownException and anything unexpected
  }

  private <T> T parse(byte[] body, Class<T> type) {
    try {
      return json.readValue(body, type);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("Malformed request body: " + e.getOriginalMessage(), e);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static Map<String, String> query(URI uri) {
    Map<String, String> params = new HashMap<>();
    String raw = uri.getRawQuery();
    if (raw != null && !raw.isEmpty()) {
      for (String pair : raw.split("&")) {
        int eq = pair.indexOf('=');
        String key = RESTUtil.decodeString(eq < 0 ? pair : pair.substring(0, eq));
        params.put(key, eq < 0 ? "" : RESTUtil.decodeString(pair.substring(eq + 1)));
      }
    }
    return params;
  }

  /** The response object to serialise, or null for 204 No Content. */
  Object route(String method, URI uri, byte[] body) {
    String path = uri.getRawPath();
    if (!path.startsWith("/v1/")) {
      throw new NoRoute(404, "No route for " + path);
    }
    String[] p = path.substring("/v1/".length()).split("/", -1);
    Map<String, String> q = query(uri);
    String route = method + " " + shape(p);
    switch (route) {
      case "GET config":
        return ConfigResponse.builder().withEndpoints(ENDPOINTS).build();
      case "GET namespaces":
        {
          Namespace parent =
              q.containsKey("parent") ? RESTUtil.decodeNamespace(q.get("parent")) : Namespace.empty();
          return q.containsKey("pageSize")
              ? CatalogHandlers.listNamespaces(catalog, parent, q.get("pageToken"), q.get("pageSize"))
              : CatalogHandlers.listNamespaces(catalog, parent);
        }
      case "POST namespaces":
        return CatalogHandlers.createNamespace(catalog, parse(body, CreateNamespaceRequest.class));
      case "GET namespaces/*":
        return CatalogHandlers.loadNamespace(catalog, RESTUtil.decodeNamespace(p[1]));
      case "HEAD namespaces/*":
        CatalogHandlers.namespaceExists(catalog, RESTUtil.decodeNamespace(p[1]));
        return null;
      case "DELETE namespaces/*":
        CatalogHandlers.dropNamespace(catalog, RESTUtil.decodeNamespace(p[1]));
        return null;
      case "POST namespaces/*/properties":
        return CatalogHandlers.updateNamespaceProperties(
            catalog,
            RESTUtil.decodeNamespace(p[1]),
            parse(body, UpdateNamespacePropertiesRequest.class));
      case "GET namespaces/*/tables":
        {
          Namespace ns = RESTUtil.decodeNamespace(p[1]);
          return q.containsKey("pageSize")
              ? CatalogHandlers.listTables(catalog, ns, q.get("pageToken"), q.get("pageSize"))
              : CatalogHandlers.listTables(catalog, ns);
        }
      case "POST namespaces/*/tables":
        {
          CreateTableRequest request = parse(body, CreateTableRequest.class);
          Namespace ns = RESTUtil.decodeNamespace(p[1]);
          return request.stageCreate()
              ? CatalogHandlers.stageTableCreate(catalog, ns, request)
              : CatalogHandlers.createTable(catalog, ns, request);
        }
      case "GET namespaces/*/tables/*":
        return CatalogHandlers.loadTable(catalog, table(p));
      case "HEAD namespaces/*/tables/*":
        CatalogHandlers.tableExists(catalog, table(p));
        return null;
      case "POST namespaces/*/tables/*":
        return CatalogHandlers.updateTable(
            catalog, table(p), parse(body, UpdateTableRequest.class));
      case "DELETE namespaces/*/tables/*":
        if (Boolean.parseBoolean(q.get("purgeRequested"))) {
          CatalogHandlers.purgeTable(catalog, table(p));
        } else {
          CatalogHandlers.dropTable(catalog, table(p));
        }
        return null;
      case "POST namespaces/*/tables/*/metrics":
        return null;
      case "POST tables/rename":
        CatalogHandlers.renameTable(catalog, parse(body, RenameTableRequest.class));
        return null;
      default:
        throw new NoRoute(404, "No route for " + method + " " + path);
    }
  }

  /** The path with its variable parts (namespace, table) as `*`: namespaces/*\/tables/*. */
  private static String shape(String[] p) {
    StringBuilder s = new StringBuilder();
    for (int i = 0; i < p.length; i++) {
      if (i > 0) {
        s.append('/');
      }
      boolean variable = (i == 1 || i == 3) && "namespaces".equals(p[0]);
      s.append(variable ? "*" : p[i]);
    }
    return s.toString();
  }

  private static TableIdentifier table(String[] p) {
    return TableIdentifier.of(RESTUtil.decodeNamespace(p[1]), RESTUtil.decodeString(p[3]));
  }
}
